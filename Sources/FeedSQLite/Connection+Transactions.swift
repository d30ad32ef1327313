/// The kind of lock a transaction takes when it begins.
///
/// Related SQLite documentation: <https://www.sqlite.org/lang_transaction.html>
public enum TransactionKind: Sendable {
    /// Takes no lock until the first read or write; for read transactions.
    case deferred
    /// Takes the write lock at once, waiting within the busy policy; for every write transaction, because upgrading
    /// a deferred read to a write can fail with `SQLITE_BUSY` that no timeout resolves.
    case immediate
}

extension Connection {
    /// Runs `body` inside a transaction: commits when it returns, rolls back when it throws.
    ///
    /// ```swift
    /// try connection.transaction { db in
    ///     try db.run("INSERT INTO likes(user_key, post_key, created_at) VALUES (?, ?, ?)", user, post, now)
    ///     try db.run("INSERT INTO events(kind, user_id, post_id, like_count, at) VALUES (?, ?, ?, ?, ?)", …)
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - kind: ``TransactionKind/immediate`` (the default) for writes, ``TransactionKind/deferred`` for reads.
    ///   - body: the work; it receives this connection.
    /// - Returns: what `body` returns.
    /// - Throws: what `body` throws (after the rollback), or ``SQLiteError`` from `BEGIN`/`COMMIT`.
    /// - Precondition: no transaction is open; nest with ``savepoint(_:)`` instead.
    public func transaction<T>(_ kind: TransactionKind = .immediate, _ body: (Connection) throws -> T) throws -> T {
        precondition(!isInTransaction, "API Violation: transaction(_:) inside a transaction; use savepoint(_:)")
        try cachedStatement(kind == .immediate ? "BEGIN IMMEDIATE" : "BEGIN DEFERRED").execute()
        let result: T
        do {
            result = try body(self)
        } catch {
            rollbackQuietly()
            throw error
        }
        do {
            try cachedStatement("COMMIT").execute()
        } catch {
            // A failed COMMIT (SQLITE_BUSY, SQLITE_FULL…) may leave the transaction open; never leave it dangling.
            rollbackQuietly()
            throw error
        }
        return result
    }

    /// Runs `body` inside a savepoint, which nests inside a transaction or another savepoint: released when
    /// `body` returns, rolled back to (and released) when it throws, leaving the enclosing transaction open.
    ///
    /// Outside a transaction, a savepoint behaves as a deferred transaction.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/lang_savepoint.html>
    public func savepoint<T>(_ body: (Connection) throws -> T) throws -> T {
        try cachedStatement("SAVEPOINT feedsync").execute()
        let result: T
        do {
            result = try body(self)
        } catch {
            if isInTransaction {
                _ = try? cachedStatement("ROLLBACK TO SAVEPOINT feedsync").execute()
                _ = try? cachedStatement("RELEASE SAVEPOINT feedsync").execute()
            }
            throw error
        }
        try cachedStatement("RELEASE SAVEPOINT feedsync").execute()
        return result
    }

    func rollbackQuietly() {
        // ROLLBACK fails harmlessly when SQLite already rolled back on its own (e.g. after SQLITE_FULL).
        if isInTransaction { _ = try? cachedStatement("ROLLBACK").execute() }
    }
}
