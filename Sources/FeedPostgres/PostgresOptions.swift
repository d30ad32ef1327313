/// How a ``PostgresBackend`` uses the server: pool size, timeouts and retries.
///
/// ```swift
/// var options = PostgresOptions()
/// options.maximumConnections = 4
/// options.statementTimeout = .seconds(5)
/// let backend = try PostgresBackend(url: "postgresql://feedsync@db.example/feed?sslmode=verify-full", options: options)
/// ```
public struct PostgresOptions: Sendable, Hashable {
    /// The most connections the pool opens (each opened on first need). A call that finds them all busy waits up
    /// to ``poolTimeout``.
    public var maximumConnections: Int
    /// The server's `statement_timeout` for every pooled connection: a statement running longer is cancelled and
    /// fails with ``StorageError/timedOut(_:)``. `nil` leaves the server's setting.
    public var statementTimeout: Duration?
    /// How many times ``PostgresBackend/write(_:afterCommit:)`` runs a transaction that fails with a serialization
    /// failure (`40001`) or a deadlock (`40P01`) before it gives up with ``StorageError/busy(_:)``.
    public var retryLimit: Int
    /// How long opening a connection may take (libpq's `connect_timeout`, whole seconds, at least 2), unless the URL
    /// sets `connect_timeout` itself.
    public var connectTimeout: Duration
    /// How long a call waits for a pooled connection when all are busy before failing with
    /// ``StorageError/busy(_:)`` (SQLSTATE `53300`).
    public var poolTimeout: Duration
    /// Whether a group-commit batch of like commands runs as one call of `feedsync_apply_likes` (one round trip;
    /// the default). `false` runs it statement by statement — each command's `DELETE`/`INSERT`, its count, then all
    /// the events in one `appendEvents` (events last) — at several round trips per command, and one batch at a
    /// time per process (without the function's posts-first lock order two batches could deadlock; other
    /// processes' batches still can, and are retried): for comparison, or while investigating the function.
    public var likeBatches: Bool

    /// Options with FeedSync's defaults: 10 connections, 30 s statement timeout, 5 attempts, 10 s to connect, 30 s
    /// to wait for a connection, like batches in one statement.
    public init(
        maximumConnections: Int = 10, statementTimeout: Duration? = .seconds(30), retryLimit: Int = 5,
        connectTimeout: Duration = .seconds(10), poolTimeout: Duration = .seconds(30), likeBatches: Bool = true
    ) {
        self.maximumConnections = maximumConnections
        self.statementTimeout = statementTimeout
        self.retryLimit = retryLimit
        self.connectTimeout = connectTimeout
        self.poolTimeout = poolTimeout
        self.likeBatches = likeBatches
    }
}

/// How opening a ``PostgresBackend`` treats the database's schema. Every mode first validates the database
/// (recorded migrations and checksums) and refuses, with nothing written, one this binary must not touch:
/// `schemaNewer`, `unknownMigration`, `migrationChanged`.
public enum PostgresOpenMode: Sendable, Hashable {
    /// Read and write: apply the pending migrations (under an advisory lock, so concurrent openers migrate once).
    case migrate
    /// Read only, nothing migrated or written; a database that needs migrations is refused with
    /// ``StorageError/migrationsPending(databaseVersion:binaryVersion:)``.
    case readCurrent
    /// Read only, nothing migrated or written, at whatever schema version the database has: for reporting its
    /// version and pending migrations.
    case inspect
}
