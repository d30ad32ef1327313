public import FeedCore

/// What a transactional durable subscriber's handler and its rebuild may do with the database: run statements of
/// yours, every value bound, inside the write transaction that also moves the subscriber's cursor — so the effect and
/// the cursor commit together or not at all.
///
/// The same on both backends: placeholders are `$1`, `$2`, … (SQLite and PostgreSQL alike), and a statement that
/// fails fails the whole pass, even when the handler catches its error — the transaction is rolled back, the cursor
/// stays where it was, and the subscriber retries the batch (PostgreSQL aborts a transaction on any failed statement;
/// on SQLite the pass is failed the same way). What you may touch: your own tables, written and read as you like;
/// FeedSync's tables (`users`, `posts`, `likes`, `events`), read only — a rebuild typically reads `likes`. What you may
/// not do: run FeedSync commands or a subscriber's `catchUp()` from the handler (they would wait for the transaction
/// the handler is in; they fail with a misuse error instead), wait for anything else — a projection's `send`, whose
/// turn may be waiting for this very writer, or `waitForDelivery` — or keep the handle after the closure returned
/// (using it then traps). Work that must follow the event outside the database belongs in an `.atLeastOnce`
/// subscriber.
///
/// ```swift
/// let mirror = DurableSubscriber(name: "mirror", service: service, delivery: .transactional { event, db in
///     guard event.kind == .liked, let post = event.postID else { return }
///     try db.execute("INSERT INTO like_mirror (user_id, post_id) VALUES ($1, $2)", [.text(event.userID), .text(post)])
/// })
/// ```
public final class SubscriberTransaction {
    private let statements: any FeedUserStatements
    /// The first statement that failed; the pass fails with it when the handler returns.
    private(set) var failure: (any Error)?

    init(_ transaction: any FeedTransaction) {
        self.statements = transaction.userStatements
    }

    /// Runs one statement (or, with no arguments, a script of several) in the subscriber's transaction.
    ///
    /// - Returns: the number of rows the statement changed.
    /// - Throws: ``StorageError`` (a constraint of your table, a syntax error, a lost connection); the pass fails
    ///   with it.
    @discardableResult
    public func execute(_ sql: String, _ arguments: [DatabaseValue] = []) throws -> Int {
        try recording { try statements.execute(sql, arguments) }
    }

    /// Runs one query in the subscriber's transaction and returns its rows.
    ///
    /// - Throws: ``StorageError``; the pass fails with it.
    public func fetch(_ sql: String, _ arguments: [DatabaseValue] = []) throws -> [[DatabaseValue]] {
        try recording { try statements.fetch(sql, arguments) }
    }

    private func recording<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch {
            if failure == nil { failure = error }
            throw error
        }
    }

    /// Throws the first failed statement's error, if any: the end of every handler and rebuild call.
    func rethrowFailure() throws {
        if let failure { throw failure }
    }
}
