public import FeedCore
public import FeedSQLite
public import Foundation

/// The SQLite backend's ``FeedTransaction``: every domain operation, run by the repositories on one connection
/// inside the transaction (or snapshot) the backend opened.
///
/// Valid only while the closure it was handed to runs; the connection traps if used after that.
public final class SQLiteTransaction: FeedTransaction {
    /// The connection the transaction runs on — for code that works with this backend directly (tests, tools).
    public let connection: Connection
    /// The store's cache of user and post keys for like commands; `nil` looks every key up.
    let likeKeys: LikeKeyCache?
    /// Whether a deletion turned `secure_delete` on: the store turns it off after the transaction and checkpoints
    /// the WAL, so that no page image of the deleted rows stays in the files.
    var securelyDeleting = false
    /// Whether this transaction checked ``likeKeys`` against the database's deletion counter.
    var likeKeysChecked = false

    /// A transaction on `connection`, which must already be inside the transaction or snapshot.
    public init(_ connection: Connection) {
        self.connection = connection
        self.likeKeys = nil
    }

    /// A transaction of a store whose like commands share `likeKeys`.
    init(_ connection: Connection, likeKeys: LikeKeyCache) {
        self.connection = connection
        self.likeKeys = likeKeys
    }

    // MARK: - Users and posts

    public func insertUser(id: String, name: String, at time: Date) throws -> User {
        _ = try UserRepository(connection).insert(id: id, name: name, at: time)
        return User(id: id, name: name, createdAt: date(millis: millis(time)))
    }

    public func insertPost(id: String, authorID: String, body: String, at time: Date) throws -> Post {
        try PostRepository(connection).insert(id: id, authorID: authorID, body: body, at: time)
    }

    public func userKey(for id: String) throws -> Int64? {
        try UserRepository(connection).key(for: id)
    }

    public func postKey(for id: String) throws -> Int64? {
        try PostRepository(connection).key(for: id)
    }

    public func keys(userID: String, postID: String) throws -> (user: Int64, post: Int64) {
        try LikeRepository(connection).keys(userID: userID, postID: postID)
    }

    public func post(id: String) throws -> Post? {
        try PostRepository(connection).find(id)
    }

    public func allUsers() throws -> [User] {
        try UserRepository(connection).all()
    }

    /// A viewer known by id costs a lookup of its key first: a statement is cheap here (no round trip).
    package func feedPage(for viewer: FeedViewer, before cursor: FeedCursor?, limit: Int) throws -> (viewerKey: Int64?, rows: [FeedRow]) {
        let key: Int64?
        switch viewer {
        case .anonymous: key = nil
        case .key(let known): key = known
        case .id(let id):
            guard let found = try userKey(for: id) else { throw StorageError.userNotFound(id) }
            key = found
        }
        return (key, try PostRepository(connection).feedPage(viewerKey: key, before: cursor, limit: limit))
    }

    // MARK: - Likes

    public func insertLike(userKey: Int64, postKey: Int64, at time: Date) throws -> Bool {
        try LikeRepository(connection).insert(userKey: userKey, postKey: postKey, at: time)
    }

    public func deleteLike(userKey: Int64, postKey: Int64) throws -> Bool {
        try LikeRepository(connection).delete(userKey: userKey, postKey: postKey)
    }

    public func likeExists(userKey: Int64, postKey: Int64) throws -> Bool {
        try LikeRepository(connection).exists(userKey: userKey, postKey: postKey)
    }

    public func likedPostIDs(userKey: Int64) throws -> Set<String> {
        try LikeRepository(connection).likedPostIDs(userKey: userKey)
    }

    public func likeCount(postKey: Int64) throws -> Int? {
        try PostRepository(connection).likeCount(postKey: postKey)
    }

    // MARK: - The event log

    public func appendEvent(kind: EventKind, userID: String, postID: String?, likeCount: Int?, at time: Date) throws -> EventRecord {
        try EventLog(connection).append(kind: kind, userID: userID, postID: postID, likeCount: likeCount, at: time)
    }

    public func events(after seq: Int64, limit: Int?) throws -> [EventRecord] {
        try EventLog(connection).events(after: seq, limit: limit)
    }

    public func lastSeq() throws -> Int64 {
        try EventLog(connection).lastSeq()
    }

    public func replayBaseline() throws -> ReplayBaseline {
        try EventLog(connection).replayBaseline()
    }

    // MARK: - Durable subscribers

    public func subscriberPosition(for name: String) throws -> SubscriberPosition? {
        try SubscriberCursorRepository(connection).position(for: name)
    }

    public func advanceSubscriberCursor(_ seq: Int64, for name: String, at time: Date) throws -> Int64 {
        try SubscriberCursorRepository(connection).advanceCursor(seq, for: name, at: time)
    }

    public func markSubscriberRebuilt(_ name: String, through seq: Int64, bulkGeneration: Int64, at time: Date) throws {
        try SubscriberCursorRepository(connection).markRebuilt(name, through: seq, bulkGeneration: bulkGeneration, at: time)
    }

    // MARK: - Whole-database

    public func savepoint<T>(_ body: () throws -> T) throws -> T {
        try connection.mapErrors { try connection.savepoint { _ in try body() } }
    }
}
