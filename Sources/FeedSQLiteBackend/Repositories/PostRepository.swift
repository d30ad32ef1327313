public import FeedCore
public import FeedSQLite
public import Foundation

/// Reads and writes posts on one connection, inside the caller's transaction.
public struct PostRepository {
    let db: Connection

    /// A repository over `db`.
    public init(_ db: Connection) { self.db = db }

    static func decode(_ row: Row) -> Post {
        Post(
            id: row.string(at: 0), authorID: row.string(at: 1), body: row.string(at: 2),
            createdAt: date(millis: row.int64(at: 3)), likeCount: row.int(at: 4), sequence: row.int64(at: 5))
    }

    /// Inserts a post by an existing author.
    ///
    /// - Returns: the new post.
    /// - Throws: ``StorageError/postAlreadyExists(_:)``, ``StorageError/userNotFound(_:)`` for an unknown author,
    ///   ``StorageError/constraintViolation(field:reason:)``.
    @discardableResult
    public func insert(id: String, authorID: String, body: String, at time: Date) throws -> Post {
        try Validation.checkID(id, field: "post id")
        try Validation.checkID(authorID, field: "author id")
        try Validation.checkBody(body)
        // A deleted post's id is never given to another post.
        if try db.mapErrors({ try db.fetchInt64("SELECT count(*) FROM deleted_posts WHERE id = ?", id) }) == 1 {
            throw StorageError.postAlreadyExists(id)
        }
        let key: Int64 = try db.mapErrors(
            {
                try db.run(
                    "INSERT INTO posts (id, author_id, body, created_at) VALUES (?, ?, ?, ?)", id, authorID, body, millis(time))
                return db.lastInsertRowID
            },
            { error in
                if ResultCode.constraintUnique ~= error.code { return .postAlreadyExists(id) }
                if ResultCode.constraintForeignKey ~= error.code { return .userNotFound(authorID) }
                return nil
            })
        return Post(id: id, authorID: authorID, body: body, createdAt: date(millis: millis(time)), likeCount: 0, sequence: key)
    }

    /// The post's integer key, or `nil` when no post has this id.
    public func key(for id: String) throws -> Int64? {
        try db.mapErrors { try db.fetchInt64("SELECT post_key FROM posts WHERE id = ?", id) }
    }

    /// The post with this id, or `nil`.
    public func find(_ id: String) throws -> Post? {
        try db.mapErrors {
            try db.fetchOne(
                "SELECT p.id, p.author_id, p.body, p.created_at, p.like_count, p.post_key FROM posts p WHERE p.id = ?", id,
                decode: Self.decode)
        }
    }

    /// The post's current like count, or `nil` when there is no such post.
    public func likeCount(postKey: Int64) throws -> Int? {
        try db.mapErrors { try db.fetchInt64("SELECT like_count FROM posts WHERE post_key = ?", postKey) }.map(Int.init)
    }

    /// One feed page: up to `limit` posts strictly older than `cursor` (all when `nil`), newest first, ties broken
    /// by insertion order, each with whether `viewerKey` likes it.
    ///
    /// The query seeks into the `posts_feed` index and probes the likes primary key per row: no scan, no sort.
    ///
    /// - Complexity: O(limit · log n).
    public func feedPage(viewerKey: Int64?, before cursor: FeedCursor?, limit: Int) throws -> [FeedRow] {
        let after = cursor ?? FeedCursor(createdAtMillis: .max, sequence: .max)
        var rows: [FeedRow] = []
        rows.reserveCapacity(Self.expectedRows(limit))
        try db.mapErrors {
            try db.cachedStatement(Self.feedPageSQL).forEachRow(viewerKey ?? -1, after.createdAtMillis, after.sequence, limit) {
                row in rows.append(FeedRow(post: Self.decode(row), liked: row.bool(at: 6)))
            }
        }
        return rows
    }

    /// The capacity to reserve for a page of `limit` rows: the whole page for ordinary sizes, so that appending never
    /// grows the array.
    private static func expectedRows(_ limit: Int) -> Int { max(0, min(limit, 1000)) }

    /// The feed page query (see ``feedPage(viewerKey:before:limit:)``).
    public static let feedPageSQL = """
        SELECT p.id, p.author_id, p.body, p.created_at, p.like_count, p.post_key,
               EXISTS (SELECT 1 FROM likes l WHERE l.user_key = ?1 AND l.post_key = p.post_key) AS liked
        FROM posts p
        WHERE (p.created_at, p.post_key) < (?2, ?3)
        ORDER BY p.created_at DESC, p.post_key DESC
        LIMIT ?4
        """

    /// The number of posts.
    public func count() throws -> Int {
        Int(try db.mapErrors { try db.fetchInt64("SELECT count(*) FROM posts") } ?? 0)
    }
}
