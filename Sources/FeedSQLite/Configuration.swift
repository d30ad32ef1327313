/// How a connection behaves when another connection holds a conflicting lock.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/busy_handler.html>
public enum BusyMode: Sendable {
    /// Fail at once with `SQLITE_BUSY`.
    case immediateError
    /// Retry for up to this long, then fail with `SQLITE_BUSY`. Like `sqlite3_busy_timeout`, but the lock is tried
    /// about every millisecond rather than backing off to every 100 ms, so that a writer in another process that
    /// commits back to back cannot keep a waiting writer out for the whole timeout.
    case timeout(Duration)
    /// Ask the closure, which receives the number of earlier retries for this lock; `true` retries, `false` fails.
    case callback(@Sendable (Int) -> Bool)
}

/// When the write-ahead log is checkpointed: its pages copied into the database file, so that it can start over.
///
/// Related SQLite documentation: <https://www.sqlite.org/wal.html#checkpointing>
public enum CheckpointPolicy: Sendable, Hashable {
    /// SQLite's automatic checkpoint: the commit that leaves the log at `pages` pages or more checkpoints before it
    /// returns (SQLite's default is 1,000 pages); 0 or less switches it off (`sqlite3_wal_autocheckpoint`).
    case inline(pages: Int)
    /// A thread of the database's own checkpoints each time a commit leaves the log `pages` pages longer (at `pages`,
    /// `2 × pages`, …) while the writer goes on; only at `limit` pages or more does the writer checkpoint itself,
    /// which bounds the log when writes never pause (see `Docs/Storage.md`, "Checkpoints"). The thread starts on the
    /// first such commit. `pages` must be positive and `limit` at least `pages`.
    case background(pages: Int, limit: Int)
}

/// How many checkpoints a ``Database`` ran (``Database/checkpoints``).
public struct CheckpointStatistics: Sendable, Hashable {
    /// Checkpoints run by the database's checkpoint thread.
    public var background = 0
    /// Checkpoints run by the writer after a commit: at ``CheckpointPolicy/background(pages:limit:)``'s `limit`, or at
    /// `pages` when the thread could not open its connection.
    public var onWriter = 0
    /// Attempts that found another checkpoint running (this process's or another's) and left the work to it.
    public var busy = 0
    /// The most pages the log held after a commit of this database's writer, as far as the checkpoint policy saw
    /// (sizes below ``CheckpointPolicy/background(pages:limit:)``'s `pages` are not recorded).
    public var largestLog = 0
    /// The pages in the log after the writer's last commit (small again once the log started over).
    public var lastLog = 0

    /// No checkpoints yet.
    public init() {}
}

/// Options for opening connections.
public struct Configuration: Sendable {
    /// The busy policy of every connection; the default waits up to 5 seconds.
    public var busyMode: BusyMode = .timeout(.seconds(5))
    /// Whether the database is opened read-only: no writer connection, every access is a read.
    public var readOnly = false
    /// For a read-only database file: whether it also keeps one read-write connection open, running no statement
    /// after validation, so that closing the database removes the `-wal` and `-shm` files that reading a WAL
    /// database creates. SQLite removes them when the last connection closes, which a read-only connection cannot
    /// do. That connection never creates the file and never changes the journal mode; as the last connection it
    /// checkpoints into the file what other connections committed, as every closing writer does. A file it cannot
    /// open read-write is still read. Ignored unless ``readOnly``; off by default.
    public var removesWALFilesOnClose = false
    /// For a read-only database file with no write-ahead log to read (no `-wal` file or an empty one, no `-journal`):
    /// open it with SQLite's `immutable=1` when this process cannot write it or its directory, or when the usual
    /// opening fails to create or grow the `-wal` or `-shm` file (a read-only directory, a full disk). Ignored unless
    /// ``readOnly``; off by default.
    ///
    /// Reading a WAL database needs its `-shm` file, which a read-only directory cannot hold and a full disk has no
    /// room for; where SQLite can create it for a process that cannot write the database, it takes the database's
    /// read-only mode and stays behind, and a later writer fails on it. An immutable connection creates no file,
    /// takes no lock and opens the database `O_RDONLY`, so it cannot change it; without a log the database file holds
    /// every commit (a missing or empty `-wal` holds no frame), so what it reads is complete. What it gives up: a
    /// writer that starts while the connection is open is not seen, and that writer's checkpoint may make a read
    /// fail — so it suits reads that end soon; a reader that follows later commits must leave it off.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/uri.html#uriimmutable>,
    /// <https://www.sqlite.org/wal.html#readonly>
    public var immutableWhenUnwritable = false
    /// The largest number of concurrent reader connections a ``Database`` opens.
    public var maximumReaderCount = 4
    /// The page cache of each connection in KiB (`PRAGMA cache_size = -N`); `nil` keeps SQLite's default (2,000 KiB).
    ///
    /// 16 MiB by default: a feed page probes the likes index once per row, and with SQLite's 2 MB cache on a
    /// database of 100,000 posts and 1,000,000 likes (~60 MB) most of those probes are `pread`s (~48 a page):
    /// W2 (`feedsync-bench w2`) runs ~12,000 pages/s with 16 MiB against ~9,800 with SQLite's default. It is a
    /// bound, not an allocation: a
    /// connection's cache grows only with the pages it reads, so a small database costs what it did.
    public var cacheSizeKiB: Int? = 16_384
    /// How much of the database file each connection reads through a memory map, in MiB (`PRAGMA mmap_size`); `nil`
    /// or 0 reads every page with `pread`, SQLite's default.
    ///
    /// 256 MiB by default: a page read from the map is a memory access instead of a system call and a copy into the
    /// connection's cache, so a reader whose cache is cold (the first pages after a bulk load, a new connection)
    /// pays far less, and every reader and the writer do less work per page. Measured interleaved on 2 cores
    /// (`Docs/decisions/0016-sqlite-reads-through-a-memory-map.md`): W2 9,470 pages/s against 6,550 at full size,
    /// its p99 right after a quick-size bulk load 122 µs against 198 (raw SQLite 109), W1 +9 %. Pages of the map
    /// count in the process's resident memory while they are cached by the kernel; they are the kernel's file cache,
    /// shared and reclaimable, not the process's allocations. Writes never go through the map.
    ///
    /// A reader stops using the map while the database keeps changing under it, and uses it again once the database
    /// stays still: SQLite unmaps the file at every read transaction that finds a new commit, so under steady writes
    /// the map would be made again and its pages faulted back in at almost every read (decision 0016).
    public var memoryMapSizeMiB: Int? = 256
    /// When the writer's write-ahead log is checkpointed. Ignored for in-memory and read-only databases.
    ///
    /// By default a background thread checkpoints each time the log grew by 2,000 pages, and the writer only at 8,000
    /// (a log of ~32 MiB at most with 4 KiB pages, plus a transaction or two): SQLite's automatic checkpoint makes
    /// the commit that crosses 1,000 pages copy the log and wait for two `fdatasync`s; W1 runs ~37 % faster this way
    /// (`feedsync-bench w1 --checkpoint background` against `--checkpoint inline`;
    /// `Docs/decisions/0003-background-wal-checkpoints.md`). `.inline(pages: 1000)` is SQLite's behaviour.
    public var checkpointPolicy: CheckpointPolicy = .background(pages: 2_000, limit: 8_000)

    /// The default configuration: 5 s busy timeout, read-write, up to 4 readers.
    public init() {}

    /// How long the busy policy waits at most, used to bound retries of open-time steps.
    var busyTimeout: Duration {
        switch busyMode {
        case .immediateError: .zero
        case .timeout(let duration): duration
        case .callback: .seconds(5)
        }
    }
}
