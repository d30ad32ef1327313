/// How a connection behaves when another connection holds a conflicting lock.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/busy_handler.html>
public enum BusyMode: Sendable {
    /// Fail at once with `SQLITE_BUSY`.
    case immediateError
    /// Retry for up to this long, then fail with `SQLITE_BUSY` (SQLite's `sqlite3_busy_timeout`).
    case timeout(Duration)
    /// Ask the closure, which receives the number of earlier retries for this lock; `true` retries, `false` fails.
    case callback(@Sendable (Int) -> Bool)
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
    /// The largest number of concurrent reader connections a ``Database`` opens.
    public var maximumReaderCount = 4
    /// The page cache of each connection in KiB (`PRAGMA cache_size = -N`); `nil` keeps SQLite's default (2,000 KiB).
    ///
    /// 16 MiB by default: a feed page probes the likes index once per row, and with SQLite's 2 MB cache on a
    /// database of 100,000 posts and 1,000,000 likes (~60 MB) most of those probes were `pread`s (~48 a page):
    /// W2 went from ~9,800 to ~12,000 pages/s (see `Docs/Benchmarks.md`). It is a bound, not an allocation: a
    /// connection's cache grows only with the pages it reads, so a small database costs what it did.
    public var cacheSizeKiB: Int? = 16_384

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
