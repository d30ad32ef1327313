internal import FeedCore
internal import Foundation

/// Milliseconds since 1970 for a date, as stored in the schema (the same rounding as the SQLite backend).
func millis(_ date: Date) -> Int64 {
    Int64((date.timeIntervalSince1970 * 1000).rounded())
}

/// The date for milliseconds since 1970.
func date(millis: Int64) -> Date {
    Date(timeIntervalSince1970: Double(millis) / 1000)
}

/// One transaction (or, for ``Access/readOnce``, one connection in autocommit mode) on a PostgreSQL connection.
///
/// Expected refusals are found without a failing statement, so they do not abort the transaction (a failed
/// statement aborts a PostgreSQL transaction, unlike SQLite's): a duplicate id is an `INSERT … ON CONFLICT DO
/// NOTHING` that inserted nothing, a missing author an `INSERT … SELECT` that found no user. Any other failure
/// aborts the transaction; it is remembered in ``abortingFailure`` so that the backend rolls back (and retries a
/// deadlock) even when the body caught the error.
final class PostgresTransaction: FeedTransaction {
    /// What the transaction may do.
    enum Access {
        /// `BEGIN … READ WRITE`.
        case write
        /// `BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ`: one snapshot.
        case read
        /// No explicit transaction; each statement its own snapshot. Writes are refused.
        case readOnce
        /// No explicit transaction; each statement its own write transaction, committed when it returns (the one
        /// statement of ``PostgresBackend/commitLikes(_:join:afterCommit:)``).
        case autocommit
    }

    /// Whether statements run inside `BEGIN … COMMIT`, so that a failed one aborts the transaction.
    private var inTransaction: Bool { access == .write || access == .read }

    let connection: PostgresConnection
    let access: Access
    let location: String
    /// The first failure that aborted the transaction and was not undone by a savepoint rollback.
    private(set) var abortingFailure: PostgresFailure?
    private var savepointDepth = 0
    private var isValid = true
    /// The seq of the last event appended (even in a savepoint rolled back since: the backend only uses it to tell
    /// other processes that something may have committed, see ``PostgresNotifier``).
    var lastAppendedSeq: Int64?

    init(connection: PostgresConnection, access: Access, location: String) {
        self.connection = connection
        self.access = access
        self.location = location
    }

    /// Ends the transaction's life: using it afterwards is a programming error.
    func invalidate() { isValid = false }

    // MARK: - Running statements

    /// Runs one of FeedSync's fixed statements (prepared once per connection).
    @discardableResult
    func run(
        _ sql: String, _ parameters: [DatabaseValue] = [], prepared: Bool = true, binaryResults: Bool = false,
        claim: (PostgresFailure) -> StorageError? = { _ in nil }
    ) throws(StorageError) -> PostgresResult {
        precondition(isValid, "API Violation: a FeedTransaction used after its closure returned")
        do {
            return try connection.execute(sql, parameters, prepared: prepared, binaryResults: binaryResults)
        } catch {
            if inTransaction, !error.beforeSending, abortingFailure == nil { abortingFailure = error }
            throw claim(error) ?? error.storageError(location: location)
        }
    }

    /// Runs a script of statements through the simple query protocol (nothing bound).
    func runScript(_ sql: String) throws(StorageError) -> PostgresResult {
        precondition(isValid, "API Violation: a FeedTransaction used after its closure returned")
        do {
            return try connection.executeScript(sql)
        } catch {
            if inTransaction, !error.beforeSending, abortingFailure == nil { abortingFailure = error }
            throw error.storageError(location: location)
        }
    }

    func requireWritable() throws(StorageError) {
        precondition(isValid, "API Violation: a FeedTransaction used after its closure returned")
        guard access == .write || access == .autocommit else { throw .readOnly(path: location) }
    }

    // MARK: - Users and posts

    func insertUser(id: String, name: String, at time: Date) throws -> User {
        try requireWritable()
        try Validation.checkID(id, field: "user id")
        try Validation.checkName(name)
        let stamp = millis(time)
        let result = try run(
            "INSERT INTO users (id, name, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING RETURNING user_key",
            [.text(id), .text(name), .integer(stamp)],
            claim: { $0.sqlState == "23505" ? .userAlreadyExists(id) : nil })
        guard result.rowCount == 1 else { throw StorageError.userAlreadyExists(id) }
        return User(id: id, name: name, createdAt: date(millis: stamp))
    }

    func insertPost(id: String, authorID: String, body: String, at time: Date) throws -> Post {
        try requireWritable()
        try Validation.checkID(id, field: "post id")
        try Validation.checkID(authorID, field: "author id")
        try Validation.checkBody(body)
        let stamp = millis(time)
        let result = try run(
            """
            INSERT INTO posts (id, author_id, body, created_at)
            SELECT $1::text, u.id, $3::text, $4::bigint FROM users u
            WHERE u.id = $2::text AND NOT EXISTS (SELECT 1 FROM deleted_posts d WHERE d.id = $1::text)
            ON CONFLICT (id) DO NOTHING
            RETURNING post_key
            """,
            [.text(id), .text(authorID), .text(body), .integer(stamp)],
            claim: { failure in
                switch failure.sqlState {
                case "23505": .postAlreadyExists(id)
                case "23503": .userNotFound(authorID)
                default: nil
                }
            })
        guard let key = result.scalarInt64 else {
            // Nothing inserted: the id is taken (checked first, as SQLite's UNIQUE fails before its foreign key), or
            // the author is missing.
            // A deleted post's id is never given to another post.
            let taken = "SELECT EXISTS (SELECT 1 FROM posts WHERE id = $1) OR EXISTS (SELECT 1 FROM deleted_posts WHERE id = $1)"
            if try run(taken, [.text(id)]).bool(0, 0) == true {
                throw StorageError.postAlreadyExists(id)
            }
            throw StorageError.userNotFound(authorID)
        }
        return Post(id: id, authorID: authorID, body: body, createdAt: date(millis: stamp), likeCount: 0, sequence: key)
    }

    func userKey(for id: String) throws -> Int64? {
        try run("SELECT user_key FROM users WHERE id = $1", [.text(id)]).scalarInt64
    }

    func postKey(for id: String) throws -> Int64? {
        try run("SELECT post_key FROM posts WHERE id = $1", [.text(id)]).scalarInt64
    }

    func keys(userID: String, postID: String) throws -> (user: Int64, post: Int64) {
        let result = try run(
            "SELECT (SELECT user_key FROM users WHERE id = $1), (SELECT post_key FROM posts WHERE id = $2)",
            [.text(userID), .text(postID)])
        guard let user = result.int64(0, 0) else { throw StorageError.userNotFound(userID) }
        guard let post = result.int64(0, 1) else { throw StorageError.postNotFound(postID) }
        return (user, post)
    }

    func post(id: String) throws -> Post? {
        let result = try run(
            "SELECT id, author_id, body, created_at, like_count, post_key FROM posts WHERE id = $1", [.text(id)])
        return result.rowCount > 0 ? Self.decodePost(result, row: 0) : nil
    }

    func allUsers() throws -> [User] {
        let result = try run("SELECT id, name, created_at FROM users ORDER BY id")
        return (0..<result.rowCount).map { row in
            User(id: result.string(row, 0) ?? "", name: result.string(row, 1) ?? "", createdAt: date(millis: result.int64(row, 2) ?? 0))
        }
    }

    func savepoint<T>(_ body: () throws -> T) throws -> T {
        precondition(isValid, "API Violation: a FeedTransaction used after its closure returned")
        // Outside a transaction every statement is its own; there is nothing to roll back to.
        guard inTransaction else { return try body() }
        savepointDepth += 1
        defer { savepointDepth -= 1 }
        // Identifiers cannot be bound; the name is built from an integer only.
        let name = "feedsync_savepoint_\(savepointDepth)"
        let failureBefore = abortingFailure
        try run("SAVEPOINT " + name, prepared: false)
        let value: T
        do {
            value = try body()
        } catch {
            rollBack(to: name, restoring: failureBefore)
            throw error
        }
        if let failure = abortingFailure, failureBefore == nil {
            // The body caught a failure that aborted the transaction: its changes cannot be kept without the
            // statement that failed, so the savepoint fails with that failure (the transaction goes on).
            rollBack(to: name, restoring: failureBefore)
            throw failure.storageError(location: location)
        }
        try run("RELEASE SAVEPOINT " + name, prepared: false)
        return value
    }

    private func rollBack(to name: String, restoring failure: PostgresFailure?) {
        do {
            try connection.execute("ROLLBACK TO SAVEPOINT " + name)
            try connection.execute("RELEASE SAVEPOINT " + name)
            abortingFailure = failure
        } catch {
            // The connection is gone or the transaction is beyond repair: keep the aborting failure, so the backend
            // rolls back the whole transaction.
            if abortingFailure == nil { abortingFailure = error }
        }
    }
}
