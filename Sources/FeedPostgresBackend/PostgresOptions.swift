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
    /// How long the client waits for the server's answer to one round trip before it gives the connection up and
    /// the call fails with ``StorageError/connectionLost(location:reason:)``: the bound on a command when the server
    /// vanished without closing the connection (a network partition, a dead host, a proxy whose far side is gone),
    /// which TCP keepalives cannot see through a proxy or a NAT. Keep it above ``statementTimeout``, so that a slow
    /// statement gets the server's own cancel (``StorageError/timedOut(_:)``) first; the change watch's ping uses at
    /// most 5 s of it. `nil` waits as long as the socket lives.
    public var responseTimeout: Duration?
    /// How many times ``PostgresBackend/write(_:afterCommit:)`` runs a transaction that fails with a serialization
    /// failure (`40001`) or a deadlock (`40P01`) before it gives up with ``StorageError/busy(_:)``.
    public var retryLimit: Int
    /// How long opening a connection may take (libpq's `connect_timeout`, whole seconds, at least 2), unless the URL
    /// sets `connect_timeout` itself.
    public var connectTimeout: Duration
    /// How long a call waits for a pooled connection when all are busy before failing with
    /// ``StorageError/busy(_:)`` (SQLSTATE `53300`).
    public var poolTimeout: Duration

    /// Options with FeedSync's defaults: 10 connections, 15 s statement timeout, 20 s response timeout, 5 attempts,
    /// 10 s to connect, 30 s to wait for a connection.
    public init(
        maximumConnections: Int = 10, statementTimeout: Duration? = .seconds(15), responseTimeout: Duration? = .seconds(20),
        retryLimit: Int = 5, connectTimeout: Duration = .seconds(10), poolTimeout: Duration = .seconds(30)
    ) {
        self.maximumConnections = maximumConnections
        self.statementTimeout = statementTimeout
        self.responseTimeout = responseTimeout
        self.retryLimit = retryLimit
        self.connectTimeout = connectTimeout
        self.poolTimeout = poolTimeout
    }
}

extension PostgresOptions {
    /// The deadline of the change watch's ping (its read of the log head): at most 5 s, so that a listening connection
    /// that went silent is replaced long before a command would give up.
    var pingDeadline: Duration? {
        responseTimeout.map { min($0, .seconds(5)) }
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
