/// How ``FeedService/init(location:options:bridge:logger:)-(String,_,_,_)`` opens a database, on either backend.
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
    /// The longest a statement may run before the server cancels it (PostgreSQL); 15 seconds by default.
    public var statementTimeout: Duration = .seconds(15)
    /// How long a PostgreSQL client waits for the server's answer to one round trip before it closes the connection
    /// and the call fails with `connectionLost` (PostgreSQL); 20 seconds by default. It bounds a command when the
    /// server vanished without closing the connection — a partition, a dead host, a proxy whose far side is gone —
    /// which TCP keepalives cannot see through a proxy or a NAT. Keep it above ``statementTimeout``, so that a slow
    /// statement is cancelled by the server first. `nil` waits as long as the socket lives. See
    /// `Docs/Reliability.md`.
    public var responseTimeout: Duration? = .seconds(20)
    /// The most connections a process opens to a PostgreSQL server; 10 by default.
    public var maximumConnections = 10
    /// SQLite: remove the `-wal` and `-shm` files a read-only open created when the last connection closes.
    public var removesWALFilesOnClose = false
    /// SQLite, read-only modes: read a database file that has no write-ahead log to read as immutable (SQLite's
    /// `immutable=1`: no `-wal` or `-shm` file created, no lock taken) when this process cannot write the file or its
    /// directory, or when the disk has no room for the `-shm` file. For reads that end soon: such a reader never sees
    /// later commits, so one that follows changes leaves it off. See `Configuration.immutableWhenUnwritable`.
    public var immutableWhenUnwritable = false
    /// SQLite: read the database file through a memory map (`Configuration.memoryMapSizeMiB`, 256 MiB; the default),
    /// or, when `false`, with `pread` as SQLite does by itself. The map pays off over many reads; a process that reads
    /// a few dozen pages once and ends (a command line's one-shot read) spends more on faulting the mapped pages in
    /// and unmapping them than the copies cost. See `Docs/decisions/0016-sqlite-reads-through-a-memory-map.md`.
    public var memoryMap = true
    /// SQLite: checkpoint the write-ahead log on a background thread, so that no commit waits for a checkpoint (the
    /// default), or, when `false`, inside the commit that fills it past 1,000 pages as SQLite does by itself. See
    /// `Configuration.checkpointPolicy` and `Docs/Storage.md` ("Checkpoints").
    public var backgroundCheckpoints = true
    /// The most threads the service's async calls run on at once (``FeedService/Configuration/blockingThreads``);
    /// further calls wait in a queue. 8 by default, a pool shared by every service with the default; another value
    /// gives the service a pool of its own. At least 1.
    public var blockingThreads = FeedService.Configuration.defaultBlockingThreads
    /// A command slower than this, from its call to its `COMMIT`, is logged as ``FeedLogEvent/Kind/slowCommand``, and a
    /// query as ``FeedLogEvent/Kind/slowQuery`` (when the service has a logger); `nil` logs none. 1 second by default.
    public var slowCommandThreshold: Duration? = .seconds(1)

    /// The defaults.
    public init() {}
}
