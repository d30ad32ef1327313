public import FeedCore
internal import Foundation

/// FeedSync on a PostgreSQL server, through libpq.
///
/// ```swift
/// let backend = try PostgresBackend(url: "postgresql://feedsync@localhost/feed")   // connects, migrates
/// let user = try backend.write({ tx in try tx.insertUser(id: "user1", name: "Ada", at: Date()) }, afterCommit: { _ in })
/// let page = try backend.read { tx in try tx.feedPage(for: .anonymous, before: nil, limit: 20).rows }
/// ```
///
/// - **URL**: only libpq URIs, `postgresql://` or `postgres://`; libpq reads them, so TLS (`sslmode`,
///   `sslrootcert`, …), `.pgpass`, `PGPASSWORD` and service files work as libpq documents. ``location`` is the URL
///   without its password (``redacted(_:)``); no error or log names the password or any bound value.
/// - **Connections**: a pool of up to ``PostgresOptions/maximumConnections``, opened lazily, each with
///   `application_name=feedsync` and the statement timeout; a backend opened only to read sets
///   `default_transaction_read_only` too. A connection found broken is discarded with the idle
///   ones: that call fails with ``StorageError/connectionLost(location:reason:)``, the next one reconnects.
/// - **Writes**: `READ COMMITTED` transactions, and like batches as one autocommit statement
///   (``commitLikes(_:join:afterCommit:)``, one round trip, applied once even when sent twice); a serialization failure or deadlock reruns the whole body (up to
///   ``PostgresOptions/retryLimit`` attempts, jittered backoff), then fails with ``StorageError/busy(_:)``.
/// - **Reads**: ``read(_:)`` is one `REPEATABLE READ` read-only snapshot; ``readOnce(_:)`` runs each statement on
///   its own.
/// - **The event log**: seqs come from the one-row `event_log_head`, whose row lock — the last lock a transaction
///   takes, held from its event append to its commit — orders event-writing commits, so seqs are dense and in
///   commit order (see ``FeedTransaction/appendEvent(kind:userID:postID:likeCount:at:)`` and `Docs/Storage.md`).
/// - **Like batches**: ``FeedTransaction/applyLikes(_:)`` runs a group-commit batch as one call of the
///   `feedsync_like_results` function (migration 0008): posts, then users, locked in key order, units isolated,
///   events last.
/// - **Times** are stored as BIGINT milliseconds since 1970, as in SQLite, so every date round-trips identically.
public final class PostgresBackend: FeedBackend {
    /// `PostgreSQL`, the backend name (``FeedBackendTraits/name``) and the backend of every ``DatabaseFailure`` this backend reports.
    public static let name = "PostgreSQL"

    /// Whether this program can load libpq at all: `false` in a fully static executable (no dynamic loader), where
    /// opening a PostgreSQL location fails with `unsupportedLocation`. Loads nothing.
    public static var canLoadLibPQ: Bool { LibPQ.isLoadable }

    /// The URL without its password.
    public let location: String
    /// How the backend was opened.
    public let mode: PostgresOpenMode
    /// The options it was opened with.
    public let options: PostgresOptions
    /// The migrations its schema was brought to (or checked against).
    public let migrator: PostgresMigrator
    let url: String
    private let pool: ConnectionPool
    let writers = WritingThreads()
    /// The lanes like batches are sent on (``commitLikes(_:join:afterCommit:)``), one batch at a time each.
    let likeLanes = LikeLanes()
    /// Announces this backend's commits to other processes' change watches (``PostgresOpenMode/migrate`` only).
    let notifier: PostgresNotifier?
    /// Reconnects and retried writes, for the service's logger.
    package let notices: BackendNotices

    /// Connects to the database at `url`, validates its schema and, in ``PostgresOpenMode/migrate``, migrates it.
    ///
    /// Validation and migration run on a dedicated session, which is closed again; pooled connections open on
    /// first use.
    ///
    /// - Parameters:
    ///   - url: a libpq URI, `postgresql://user@host:port/database?sslmode=…`.
    ///   - options: pool size, timeouts, retries.
    ///   - mode: how the schema is treated; the read-only modes refuse writes with ``StorageError/readOnly(path:)``.
    ///   - migrator: the migrations (this binary's embedded ones by default).
    /// - Throws: ``StorageError``: `cannotOpen` for a string that is not a PostgreSQL URL; `connectionLost` when the
    ///   server cannot be reached or refuses the login; `schemaNewer`, `unknownMigration`, `migrationChanged`
    ///   (nothing written); `migrationsPending` in ``PostgresOpenMode/readCurrent``.
    public init(
        url: String, options: PostgresOptions = PostgresOptions(), mode: PostgresOpenMode = .migrate,
        migrator: PostgresMigrator = .embedded
    ) throws(StorageError) {
        let location = Self.redacted(url)
        guard PostgresURL.isAccepted(url) else {
            throw .cannotOpen(
                path: location, reason: "not a PostgreSQL URL; use postgresql://user@host:port/database (a libpq URI)")
        }
        self.location = location
        self.url = url
        self.mode = mode
        self.options = options
        self.migrator = migrator
        let session = try Self.connect(url: url, location: location, options: options, statementTimeout: nil, readOnly: mode != .migrate)
        defer { session.close() }
        switch mode {
        case .migrate:
            try migrator.migrate(session, location: location)
        case .readCurrent:
            let (version, pending) = try migrator.validate(session, location: location)
            if !pending.isEmpty { throw .migrationsPending(databaseVersion: version, binaryVersion: migrator.latestVersion) }
        case .inspect:
            _ = try migrator.validate(session, location: location)
        }
        // Sessions of a backend that writes are read-write by default, so that a like batch runs as one statement
        // in autocommit (``commitLikes(_:join:afterCommit:)``); the other modes' sessions cannot write at all.
        let readOnly = mode != .migrate
        if mode == .migrate {
            let notifier = PostgresNotifier { () throws(PostgresFailure) in
                try PostgresConnection.open(
                    url: url, applicationName: "feedsync-notify", connectTimeout: options.connectTimeout,
                    statementTimeout: options.statementTimeout, readOnlyByDefault: readOnly,
                    responseTimeout: options.responseTimeout)
            }
            notifier.start()
            self.notifier = notifier
        } else {
            notifier = nil
        }
        let notices = BackendNotices()
        self.notices = notices
        pool = ConnectionPool(capacity: options.maximumConnections, waitLimit: options.poolTimeout, notices: notices) {
            () throws(PostgresFailure) in
            try PostgresConnection.open(
                url: url, applicationName: "feedsync", connectTimeout: options.connectTimeout,
                statementTimeout: options.statementTimeout, readOnlyByDefault: readOnly,
                responseTimeout: options.responseTimeout)
        }
    }

    /// Opens one connection, mapping a failure to ``StorageError/connectionLost(location:reason:)``.
    ///
    /// - Parameter responseTimeout: the deadline of its round trips; by default `options.responseTimeout`.
    static func connect(
        url: String, location: String, options: PostgresOptions, statementTimeout: Duration?, readOnly: Bool,
        applicationName: String = "feedsync", responseTimeout: Duration?? = nil
    ) throws(StorageError) -> PostgresConnection {
        try LibPQ.require(location: location)
        do {
            return try PostgresConnection.open(
                url: url, applicationName: applicationName, connectTimeout: options.connectTimeout,
                statementTimeout: statementTimeout, readOnlyByDefault: readOnly,
                responseTimeout: responseTimeout ?? options.responseTimeout)
        } catch {
            throw error.storageError(location: location)
        }
    }

    /// `url` with its password removed, fit to print: the user information keeps only the user name and
    /// `password` query parameters are dropped; a string that is not a `postgresql://` URL is not shown at all.
    ///
    /// ```swift
    /// PostgresBackend.redacted("postgresql://app:s3cret@db:5432/feed?sslmode=require")
    /// // "postgresql://app@db:5432/feed?sslmode=require"
    /// ```
    public static func redacted(_ url: String) -> String {
        PostgresURL.redacted(url)
    }

    /// Any client anywhere may commit; two write transactions at once, or one with a single pooled connection.
    package var traits: FeedBackendTraits {
        FeedBackendTraits(
            name: Self.name, location: location, othersCanWrite: true,
            concurrentWriteTransactions: min(2, options.maximumConnections), reusesKeys: false)
    }

    // MARK: - Transactions

    /// Runs `body` in a `READ COMMITTED` write transaction, commits it, then calls `afterCommit`.
    ///
    /// When the transaction fails with a serialization failure (`40001`) or a deadlock (`40P01`) — thrown to
    /// `body` or caught by it — it is rolled back and `body` runs again, up to ``PostgresOptions/retryLimit``
    /// attempts with a jittered, growing pause; then the failure is ``StorageError/busy(_:)``. A body that caught
    /// any other failure of a statement cannot commit (PostgreSQL aborted the transaction): the write rolls back and
    /// throws that failure. `afterCommit` runs on this thread after the connection went back to the pool, while
    /// ``isWritingOnCurrentThread`` is still true.
    ///
    /// - Throws: what `body` throws, or ``StorageError``: `readOnly` in a read-only mode, `busy`, `timedOut`,
    ///   `connectionLost` (the transaction did not commit — or, if the connection was lost during `COMMIT`, its
    ///   outcome is unknown).
    package func write<T>(_ body: (any FeedTransaction) throws -> T, afterCommit: (T) -> Void) throws -> T {
        guard mode == .migrate else { throw StorageError.readOnly(path: location) }
        guard !writers.containsCurrentThread else { throw Self.reentrantWrite }
        writers.enter()
        defer { writers.leave() }
        return try committing(afterCommit: afterCommit) {
            try withConnection { connection in try Self.attemptWrite(body, on: connection, location: location) }
        }
    }

    /// Runs `attempt` until it commits — again after a pause on a serialization failure or deadlock
    /// (``WriteOutcome/retry(_:)``), at once when it returns `nil` — at most ``PostgresOptions/retryLimit`` times; then
    /// signals the commit and runs `afterCommit`.
    func committing<T>(afterCommit: (T) -> Void, _ attempt: () throws -> WriteOutcome<T>?) throws -> T {
        var attempts = 1
        while true {
            let outcome = try attempt()
            switch outcome {
            case .committed(let value, let lastSeq)?:
                if let lastSeq { notifier?.signal(committed: lastSeq) }
                afterCommit(value)
                return value
            case .retry(let failure)?:
                guard attempts < max(1, options.retryLimit) else { throw StorageError.busy(failure) }
                notices.post(
                    BackendNotice(
                        .writeRetried, "a write failed with \(failure.code) and runs again",
                        ["code": failure.code, "attempt": "\(attempts + 1)"]))
                Self.pause(beforeAttempt: attempts + 1)
            case nil:
                guard attempts < max(1, options.retryLimit) else {
                    let failure = DatabaseFailure(backend: Self.name, code: "FSB02", message: "a like batch was sent again too often")
                    throw StorageError.busy(failure)
                }
                notices.post(BackendNotice(.writeRetried, "a like batch is sent again", ["code": "FSB02", "attempt": "\(attempts + 1)"]))
            }
            attempts += 1
        }
    }

    enum WriteOutcome<T> {
        /// The value, and the seq of the last event the transaction appended.
        case committed(T, lastSeq: Int64?)
        case retry(DatabaseFailure)
    }

    private static func attemptWrite<T>(
        _ body: (any FeedTransaction) throws -> T, on connection: PostgresConnection, location: String
    ) throws -> WriteOutcome<T> {
        try control(connection, "BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE", location: location)
        let transaction = PostgresTransaction(connection: connection, access: .write, location: location)
        defer { transaction.invalidate() }
        let value: T
        do {
            value = try body(transaction)
        } catch {
            rollBack(connection)
            if let failure = transaction.abortingFailure, failure.isRetryable, !failure.connectionBroken {
                return .retry(failure.databaseFailure)
            }
            // A deadlock inside a savepoint that the body let through: the savepoint was rolled back, but only a
            // new attempt can do the work.
            if case StorageError.busy(let failure) = error, failure.code == "40001" || failure.code == "40P01" {
                return .retry(failure)
            }
            throw error
        }
        if let failure = transaction.abortingFailure {
            rollBack(connection)
            if failure.isRetryable { return .retry(failure.databaseFailure) }
            throw failure.storageError(location: location)
        }
        do {
            let result = try connection.executeScript("COMMIT")
            guard result.commandStatus != "ROLLBACK" else {
                throw StorageError.database(
                    DatabaseFailure(backend: name, code: "25P02", message: "the transaction was aborted and rolled back", sql: "COMMIT"))
            }
        } catch let failure as PostgresFailure {
            if failure.isRetryable { return .retry(failure.databaseFailure) }
            throw failure.storageError(location: location)
        }
        return .committed(value, lastSeq: transaction.lastAppendedSeq)
    }

    /// Sleeps before a retry: about 10 ms doubled per attempt (at most 320 ms), ±50 % at random, so that two
    /// transactions that deadlocked do not collide again in step.
    private static func pause(beforeAttempt attempt: Int) {
        let base = 10_000 << min(attempt - 2, 5)
        usleep(UInt32(Int.random(in: (base / 2)...(base + base / 2))))
    }

    /// A second write from inside a write on the same thread: it could wait for itself (the event-log head lock).
    static let reentrantWrite = StorageError.database(
        DatabaseFailure(
            backend: name, code: "25001",
            message: "a write from inside a write on the same thread (for example a command run from a transactional handler); "
                + "use the transaction you were given"))

    /// Runs `body` in a read-only `REPEATABLE READ` transaction: one snapshot for every statement.
    package func read<T>(_ body: (any FeedTransaction) throws -> T) throws -> T {
        try withConnection { connection in
            try Self.control(connection, "BEGIN READ ONLY ISOLATION LEVEL REPEATABLE READ", location: location)
            let transaction = PostgresTransaction(connection: connection, access: .read, location: location)
            defer { transaction.invalidate() }
            let value: T
            do {
                value = try body(transaction)
            } catch {
                Self.rollBack(connection)
                throw error
            }
            try Self.control(connection, "COMMIT", location: location)
            return value
        }
    }

    /// Runs `body` on a pooled connection without a transaction: each statement sees its own snapshot; the
    /// transaction refuses writes.
    package func readOnce<T>(_ body: (any FeedTransaction) throws -> T) throws -> T {
        try withConnection { connection in
            let transaction = PostgresTransaction(connection: connection, access: .readOnce, location: location)
            defer { transaction.invalidate() }
            return try body(transaction)
        }
    }

    /// Whether the calling thread is inside ``write(_:afterCommit:)`` or ``bulkLoad(_:)`` of this backend.
    public var isWritingOnCurrentThread: Bool { writers.containsCurrentThread }

    func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        do {
            return try pool.withConnection(body)
        } catch let error as ConnectionPool.PoolError {
            switch error {
            case .closed: throw StorageError.database(DatabaseFailure(backend: Self.name, code: "08003", message: "the backend is closed"))
            case .exhausted:
                throw StorageError.busy(
                    DatabaseFailure(
                        backend: Self.name, code: "53300",
                        message: "none of the \(pool.capacity) pooled connections became free within \(options.poolTimeout)"))
            }
        } catch let failure as PostgresFailure {
            throw failure.storageError(location: location)
        }
    }

    /// Runs a transaction-control statement.
    static func control(_ connection: PostgresConnection, _ sql: String, location: String) throws(StorageError) {
        do {
            try connection.executeScript(sql)
        } catch {
            throw error.storageError(location: location)
        }
    }

    /// Rolls back whatever is open; a connection that cannot is broken, and the pool discards it.
    static func rollBack(_ connection: PostgresConnection) {
        _ = try? connection.executeScript("ROLLBACK")
    }

    // MARK: - Whole-database

    /// The schema versions: the database's (its newest recorded migration), this binary's, and the pending ones.
    public func schemaStatus() throws -> SchemaStatus {
        try withConnection { connection in try migrator.status(connection, location: location) }
    }

    /// A watch on its own connection that `LISTEN`s for other processes' commits (their backends send
    /// `pg_notify('feedsync_events', seq)` after committing) and reads `event_log_head` on every check: a
    /// notification ends ``FeedChangeWatch/wait(timeout:)`` with `.changed`, ``FeedChangeWatch/poll()`` reports a
    /// change of the last seq. (`watchFiles` is SQLite's; it is ignored.)
    package func makeChangeWatch(watchFiles: Bool) throws -> any FeedChangeWatch {
        let url = url
        let location = location
        let options = options
        return try PostgresChangeWatch(location: location, pool: pool) { () throws(StorageError) in
            try Self.connect(
                url: url, location: location, options: options, statementTimeout: options.statementTimeout, readOnly: true,
                applicationName: "feedsync", responseTimeout: .some(options.pingDeadline))
        }
    }

    /// Closes the idle connections; connections in use close when their call ends, and later calls fail. The
    /// notifier sends a notification still due, then closes its connection (waiting at most 2 s).
    public func close() {
        notifier?.stop()
        pool.close()
    }

    deinit {
        // Never waits: the notifier's thread holds the notifier, sends what is due and ends on its own.
        notifier?.stop(timeout: .zero)
    }
}

/// The threads inside a write of one backend.
///
/// `@unchecked Sendable`: `threads` is only touched while `lock` is held.
final class WritingThreads: @unchecked Sendable {
    private let lock = NSLock()
    private var threads: [pthread_t] = []

    var containsCurrentThread: Bool {
        let current = pthread_self()
        return lock.withLock { threads.contains { pthread_equal($0, current) != 0 } }
    }

    func enter() {
        let current = pthread_self()
        lock.withLock { threads.append(current) }
    }

    func leave() {
        let current = pthread_self()
        lock.withLock {
            if let index = threads.firstIndex(where: { pthread_equal($0, current) != 0 }) { threads.remove(at: index) }
        }
    }
}
