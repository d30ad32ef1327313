/// How ``FeedService/init(location:options:bridge:)`` opens a database, on either backend.
public struct FeedOpenOptions: Sendable, Hashable {
    /// How the schema is treated.
    public enum Mode: Sendable, Hashable {
        /// Read and write; apply pending migrations (creating a missing SQLite file). The default.
        case migrate
        /// Read only, nothing migrated or written; a database that needs migrations is refused.
        case readCurrent
        /// Read only, at whatever schema version the database has (up to this binary's): for `status`.
        case inspect
    }

    /// How the schema is treated; ``Mode/migrate`` by default.
    public var mode: Mode = .migrate
    /// How long a write waits for another connection's lock before failing as busy (SQLite's busy timeout);
    /// 5 seconds by default.
    public var busyTimeout: Duration = .seconds(5)
    /// The longest a statement may run before the server cancels it (PostgreSQL); 30 seconds by default.
    public var statementTimeout: Duration = .seconds(30)
    /// The most connections a process opens to a PostgreSQL server; 10 by default.
    public var maximumConnections = 10
    /// SQLite: remove the `-wal` and `-shm` files a read-only open created when the last connection closes.
    public var removesWALFilesOnClose = false
    /// SQLite: checkpoint the write-ahead log on a background thread, so that no commit waits for a checkpoint (the
    /// default), or, when `false`, inside the commit that fills it past 1,000 pages as SQLite does by itself. See
    /// `Configuration.checkpointPolicy` and `Docs/Storage.md` ("Checkpoints").
    public var backgroundCheckpoints = true

    /// The defaults.
    public init() {}
}
