public import FeedCore
public import FeedSQLite
public import Foundation

/// Reads and writes likes on one connection, inside the caller's transaction.
///
/// Each like added or removed here also moves `posts.like_count` by one, in the same transaction (schema version 3;
/// triggers did it before): every FeedSync path that changes likes goes through this type or recounts (bulk loads).
public struct LikeRepository {
    let db: Connection

    /// A repository over `db`.
    public init(_ db: Connection) { self.db = db }

    /// The integer keys of a user and a post, looked up in one statement.
    ///
    /// - Throws: ``StorageError/userNotFound(_:)`` or ``StorageError/postNotFound(_:)``.
    public func keys(userID: String, postID: String) throws -> (user: Int64, post: Int64) {
        let keys = try db.mapErrors {
            try db.fetchOne(
                "SELECT (SELECT user_key FROM users WHERE id = ?1), (SELECT post_key FROM posts WHERE id = ?2)",
                userID, postID
            ) { row in (row.optionalInt64(at: 0), row.optionalInt64(at: 1)) }
        }
        guard let user = keys?.0 else { throw StorageError.userNotFound(userID) }
        guard let post = keys?.1 else { throw StorageError.postNotFound(postID) }
        return (user, post)
    }

    /// Adds a like and counts it on its post; does nothing when it exists.
    ///
    /// - Returns: `true` when a row was inserted.
    @discardableResult
    public func insert(userKey: Int64, postKey: Int64, at time: Date) throws -> Bool {
        try db.mapErrors {
            let inserted = try db.run(
                "INSERT OR IGNORE INTO likes (user_key, post_key, created_at) VALUES (?, ?, ?)", userKey, postKey, millis(time))
            guard inserted > 0 else { return false }
            try db.run("UPDATE posts SET like_count = like_count + 1 WHERE post_key = ?", postKey)
            return true
        }
    }

    /// Removes a like and uncounts it on its post; does nothing when it does not exist.
    ///
    /// - Returns: `true` when a row was deleted.
    @discardableResult
    public func delete(userKey: Int64, postKey: Int64) throws -> Bool {
        try db.mapErrors {
            guard try db.run("DELETE FROM likes WHERE user_key = ? AND post_key = ?", userKey, postKey) > 0 else { return false }
            try db.run("UPDATE posts SET like_count = like_count - 1 WHERE post_key = ?", postKey)
            return true
        }
    }

    /// Whether the user likes the post.
    public func exists(userKey: Int64, postKey: Int64) throws -> Bool {
        try db.mapErrors {
            try db.fetchInt64("SELECT EXISTS (SELECT 1 FROM likes WHERE user_key = ? AND post_key = ?)", userKey, postKey) == 1
        }
    }

    /// The ids of every post the user likes.
    public func likedPostIDs(userKey: Int64) throws -> Set<String> {
        try db.mapErrors {
            var ids = Set<String>()
            try db.cachedStatement(
                "SELECT p.id FROM likes l JOIN posts p ON p.post_key = l.post_key WHERE l.user_key = ?"
            ).forEachRow(userKey) { row in ids.insert(row.string(at: 0)) }
            return ids
        }
    }

    /// Every like as (user id, post id) pairs, for invariant checks and replay comparisons.
    ///
    /// - Complexity: a full scan of the likes table.
    public func allPairs() throws -> Set<LikePair> {
        try db.mapErrors {
            var pairs = Set<LikePair>()
            try db.cachedStatement(
                """
                SELECT u.id, p.id FROM likes l
                JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key
                """
            ).forEachRow { row in pairs.insert(LikePair(userID: row.string(at: 0), postID: row.string(at: 1))) }
            return pairs
        }
    }

    /// The number of like rows.
    public func count() throws -> Int {
        Int(try db.mapErrors { try db.fetchInt64("SELECT count(*) FROM likes") } ?? 0)
    }
}
