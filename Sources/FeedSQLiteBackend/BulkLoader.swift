internal import FeedCore
internal import FeedSQLite
public import Foundation

/// The bulk insert path for seeding: many users, posts and likes in one transaction with reused statements.
///
/// Inside ``load(into:_:)`` likes are inserted without counting them; when the body returns, every post whose like
/// count differs from its like rows is recounted in one statement, in the same transaction, so the invariant holds
/// at commit exactly as it does for single writes.
///
/// Bulk-loaded rows have no events. When a load inserts likes, the same transaction records it in the log
/// (``EventLog/recordBulkLoad()``): the log no longer rebuilds the likes table (`log_state.bulk_loaded`), and every
/// durable subscriber must rebuild its state from the tables before it applies another event
/// (``ReplayBaseline/rebuildPoint(for:)``). Users and posts alone do not count: the log's like events never
/// depended on them being logged.
///
/// ```swift
/// try BulkLoader.load(into: store) { loader in
///     let user = try loader.addUser(id: "user1", name: "")
///     let post = try loader.addPost(id: "post1", authorID: "user1", body: "hello", createdAt: Date())
///     try loader.addLike(userKey: user, postKey: post, createdAt: Date())
/// }
/// ```
public final class BulkLoader {
    private let insertUser: Statement
    private let insertPost: Statement
    private let insertLike: Statement
    private let insertLikeIfAbsent: Statement
    private let db: Connection
    /// Likes inserted so far by this loader.
    private var likesInserted = 0

    init(_ db: Connection) throws {
        self.db = db
        insertUser = try db.makeStatement("INSERT INTO users (id, name, created_at) VALUES (?, ?, ?)")
        insertPost = try db.makeStatement("INSERT INTO posts (id, author_id, body, created_at) VALUES (?, ?, ?, ?)")
        insertLike = try db.makeStatement("INSERT INTO likes (user_key, post_key, created_at) VALUES (?, ?, ?)")
        insertLikeIfAbsent = try db.makeStatement("INSERT OR IGNORE INTO likes (user_key, post_key, created_at) VALUES (?, ?, ?)")
    }

    /// Runs `body` in one IMMEDIATE transaction with the bulk statements, then restores the like-count invariant: its
    /// likes are inserted without counting, and the posts whose count differs from their like rows are recounted, in
    /// one grouped pass over the likes table. A load only adds likes, so only a post with likes can differ.
    ///
    /// - Parameters:
    ///   - store: the database.
    ///   - cacheSizeKiB: page cache for the load (restored afterwards); a fixed bound, so memory does not grow with
    ///     the number of rows.
    /// - Throws: what `body` throws (nothing is kept), or ``StorageError``.
    public static func load<T>(into store: FeedStore, cacheSizeKiB: Int = 65_536, _ body: (BulkLoader) throws -> T) throws -> T {
        try store.write { db in
            let previousCache = try db.fetchInt64("PRAGMA cache_size") ?? -2000
            // PRAGMA takes no parameters; both values are integers, not input.
            try db.execute("PRAGMA cache_size = " + String(-abs(cacheSizeKiB)))
            defer { _ = try? db.execute("PRAGMA cache_size = " + String(previousCache)) }

            let loader = try BulkLoader(db)
            let result = try body(loader)
            try db.execute(
                """
                UPDATE posts SET like_count = counted.n
                FROM (SELECT post_key, count(*) AS n FROM likes GROUP BY post_key) AS counted
                WHERE posts.post_key = counted.post_key AND posts.like_count <> counted.n;
                """)
            if loader.likesInserted > 0 { try EventLog(db).recordBulkLoad() }
            return result
        }
    }

    /// Inserts a user and returns its integer key.
    public func addUser(id: String, name: String, createdAt: Date = Date(timeIntervalSince1970: 0)) throws -> Int64 {
        try Validation.checkID(id, field: "user id")
        try Validation.checkName(name)
        try db.mapErrors(
            { try insertUser.execute(id, name, millis(createdAt)) },
            { error in
                ResultCode.constraintUnique ~= error.code ? .userAlreadyExists(id) : nil
            })
        return db.lastInsertRowID
    }

    /// Inserts a post by an existing author and returns its integer key.
    public func addPost(id: String, authorID: String, body: String, createdAt: Date) throws -> Int64 {
        try Validation.checkID(id, field: "post id")
        try Validation.checkBody(body)
        try db.mapErrors(
            { try insertPost.execute(id, authorID, body, millis(createdAt)) },
            { error in
                if ResultCode.constraintUnique ~= error.code { return .postAlreadyExists(id) }
                if ResultCode.constraintForeignKey ~= error.code { return .userNotFound(authorID) }
                return nil
            })
        return db.lastInsertRowID
    }

    /// Inserts a like by integer keys (as returned by ``addUser(id:name:createdAt:)`` and
    /// ``addPost(id:authorID:body:createdAt:)``).
    public func addLike(userKey: Int64, postKey: Int64, createdAt: Date) throws {
        try db.mapErrors { try insertLike.execute(userKey, postKey, millis(createdAt)) }
        likesInserted += 1
    }

    /// Inserts a like by integer keys with a time in milliseconds since 1970 (the fastest path).
    public func addLike(userKey: Int64, postKey: Int64, createdAtMillis: Int64) throws {
        try db.mapErrors { try insertLike.execute(userKey, postKey, createdAtMillis) }
        likesInserted += 1
    }

    /// Inserts a like unless the pair exists already, letting the database deduplicate (so a caller drawing random
    /// pairs needs no set of its own, and memory does not grow with the number of likes).
    ///
    /// - Returns: `true` when the like was inserted.
    public func addLikeIfAbsent(userKey: Int64, postKey: Int64, createdAtMillis: Int64) throws -> Bool {
        let inserted = try db.mapErrors { try insertLikeIfAbsent.execute(userKey, postKey, createdAtMillis) } > 0
        if inserted { likesInserted += 1 }
        return inserted
    }
}

@available(*, unavailable, message: "A bulk loader lives inside its transaction.")
extension BulkLoader: Sendable {}
