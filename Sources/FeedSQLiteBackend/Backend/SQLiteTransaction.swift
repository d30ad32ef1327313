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

    public func feedPage(viewerKey: Int64?, before cursor: FeedCursor?, limit: Int) throws -> [FeedRow] {
        try PostRepository(connection).feedPage(viewerKey: viewerKey, before: cursor, limit: limit)
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

    public func allLikes() throws -> Set<LikePair> {
        try LikeRepository(connection).allPairs()
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

    public func lastSeq(before date: Date) throws -> Int64? {
        try EventLog(connection).lastSeq(before: date)
    }

    public func pruneEvents(through seq: Int64) throws -> Int {
        try EventLog(connection).prune(through: seq)
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

    public func removeSubscriberCursor(for name: String) throws {
        try SubscriberCursorRepository(connection).removeCursor(for: name)
    }

    public func subscriberCursors() throws -> [String: Int64] {
        try SubscriberCursorRepository(connection).all()
    }

    // MARK: - Whole-database

    public func counts() throws -> FeedCounts {
        FeedCounts(
            users: try UserRepository(connection).count(), posts: try PostRepository(connection).count(),
            likes: try LikeRepository(connection).count(), events: try EventLog(connection).count())
    }

    public func invariantViolations() throws -> [InvariantViolation] {
        try InvariantChecker(connection).violations()
    }

    public func savepoint<T>(_ body: () throws -> T) throws -> T {
        try connection.mapErrors { try connection.savepoint { _ in try body() } }
    }

    // MARK: - Your own tables

    @discardableResult
    public func execute(_ sql: String, _ arguments: [DatabaseValue]) throws -> Int {
        if arguments.isEmpty {
            // No values to bind: the text may hold several statements (a script), run in order.
            try connection.mapErrors { try connection.execute(sql) }
            return connection.changes
        }
        return try connection.mapErrors {
            let statement = try statement(for: sql)
            try statement.bind(numbered: arguments.map(Self.bindable))
            while try statement.step() {}
            return connection.changes
        }
    }

    /// The most statements the connection's cache may hold for SQL passed to ``execute(_:_:)`` and ``fetch(_:_:)``
    /// to be cached too; FeedSync's own are about fifty.
    static let cachedStatementLimit = 256

    /// A prepared statement for SQL of yours: from the connection's cache (a replica's and a handler's statements are
    /// a few fixed texts, run again and again), unless the cache is full — then prepared for this call only, so SQL
    /// built anew for each call can never grow the cache without end.
    private func statement(for sql: String) throws(SQLiteError) -> Statement {
        guard connection.cachedStatementCount < Self.cachedStatementLimit else { return try connection.makeStatement(sql) }
        let statement = try connection.cachedStatement(sql)
        statement.reset()
        return statement
    }

    public func fetch(_ sql: String, _ arguments: [DatabaseValue]) throws -> [[DatabaseValue]] {
        try connection.mapErrors {
            let statement = try statement(for: sql)
            try statement.bind(numbered: arguments.map(Self.bindable))
            var rows: [[DatabaseValue]] = []
            while try statement.step() {
                let row = statement.row
                rows.append((0..<row.count).map { Self.value(row.value(at: $0)) })
            }
            return rows
        }
    }

    private static func bindable(_ value: DatabaseValue) -> any SQLiteBindable {
        switch value {
        case .null: SQLiteValue.null
        case .integer(let value): value
        case .real(let value): value
        case .text(let value): value
        case .blob(let bytes): Data(bytes)
        }
    }

    private static func value(_ value: SQLiteValue) -> DatabaseValue {
        switch value {
        case .null: .null
        case .integer(let value): .integer(value)
        case .real(let value): .real(value)
        case .text(let value): .text(value)
        case .blob(let data): .blob([UInt8](data))
        }
    }
}
