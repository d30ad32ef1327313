internal import Foundation

/// What the domain needs from a database: the contract every FeedSync backend (SQLite, PostgreSQL) implements.
///
/// The domain (`FeedService`, sync, projections) talks to a database only through this protocol and
/// ``FeedTransaction``; it imports no backend module. The seam is a **transaction**, not a set of repositories:
/// one command runs several reads and writes and its event append inside one ``write(_:afterCommit:)``.
///
/// Threading: a backend is shared by every thread of a process. `write` and `read` run their body on the calling
/// thread and may block it (a lock, a network round trip); they never call back into the domain except through
/// the closures they are given, and never hold a lock of theirs while running `afterCommit`'s caller-visible work
/// other than the one that orders commits (see ``write(_:afterCommit:)``).
package protocol FeedBackend: AnyObject, Sendable {
    /// What this backend is: its name, location, and the facts the domain plans by.
    var traits: FeedBackendTraits { get }
    /// Where the backend reports reconnects and retried writes, for the service's logger.
    var notices: BackendNotices { get }

    /// Runs `body` in one write transaction and commits it; rolls back and rethrows when `body` throws.
    ///
    /// `afterCommit` runs once `COMMIT` succeeded, on the calling thread, while the backend still holds whatever
    /// orders its commits (SQLite's writer connection; PostgreSQL's event-log head lock is already released, but
    /// seqs are dense and in commit order, so the domain's sequencer accepts ranges out of order). A failed
    /// `COMMIT` runs nothing. A backend may run `body` more than once when the transaction failed for a reason
    /// that retrying cures (PostgreSQL's `40001`/`40P01`): `body` must not keep state from a failed attempt.
    ///
    /// - Throws: what `body` throws, or ``StorageError`` for database failures.
    func write<T>(_ body: (any FeedTransaction) throws -> T, afterCommit: (T) -> Void) throws -> T

    /// Applies like units in a write transaction of their own and commits it: what `write` with a body of
    /// ``FeedTransaction/applyLikes(_:)`` does, with the same results, failures and `afterCommit`.
    ///
    /// After the units ran, a backend may ask `join` — with how many units ran so far — for units to run in the
    /// same transaction before `COMMIT`, until it returns none (SQLite's single writer does: callers queued meanwhile
    /// share the commit). PostgreSQL does not: its batch is one statement, and units joining a transaction that
    /// already holds rows would need a lock order between the calls.
    ///
    /// - Returns: one result per unit, `join`'s units after the first ones, in order.
    /// - Throws: what `applyLikes` throws (nothing of the units committed), or ``StorageError`` for the `COMMIT`.
    func commitLikes(
        _ units: [LikeUnit], join: (_ count: Int) -> [LikeUnit],
        afterCommit: ([Result<[LikeOutcome], StorageError>]) -> Void
    ) throws -> [Result<[LikeOutcome], StorageError>]

    /// Runs `body` in a read-only transaction: one consistent snapshot.
    func read<T>(_ body: (any FeedTransaction) throws -> T) throws -> T

    /// Runs `body` for one statement's worth of reading, as cheaply as the backend can (no explicit transaction);
    /// each statement sees its own snapshot.
    func readOnce<T>(_ body: (any FeedTransaction) throws -> T) throws -> T

    /// Whether the calling thread is inside ``write(_:afterCommit:)`` of this backend (asking for a second write
    /// from there would wait for itself).
    var isWritingOnCurrentThread: Bool { get }

    /// The schema versions: the database's, this binary's, and the migrations the database still needs.
    func schemaStatus() throws -> SchemaStatus

    /// Bulk-loads users, posts and likes without events (for `feedsync seed`): one transaction, bounded memory,
    /// recorded in the log's replay baseline so durable subscribers rebuild.
    func bulkLoad<T>(_ body: (any FeedBulkLoader) throws -> T) throws -> T

    /// A watch that tells when other processes may have committed (for ``ChangeFeed``).
    ///
    /// - Parameter watchFiles: for SQLite, whether to wake on file notifications (otherwise it polls).
    /// - Throws: ``StorageError`` when the watch cannot be set up (an in-memory database has no other processes).
    func makeChangeWatch(watchFiles: Bool) throws -> any FeedChangeWatch

    /// Takes `name` for this holder if no other holder — in this process or another, on this machine or another —
    /// has it; `nil` when one does.
    ///
    /// For roles one process must play alone, such as an exclusive durable subscriber. SQLite: an exclusive
    /// `flock(2)` on a lock file next to the database (process-local for an in-memory database). PostgreSQL: a
    /// session-level advisory lock on a dedicated connection; if that connection is lost, the server releases the
    /// lock.
    func tryHold(name: String) throws -> (any FeedNameLease)?

    /// Closes every connection; later calls fail.
    func close()
}

/// What a backend is, in one value: the facts the domain reads, fixed for the backend's life.
package struct FeedBackendTraits: Sendable, Hashable {
    /// Which backend this is: `SQLite` or `PostgreSQL`.
    package let name: String
    /// Where the database is, fit to print: a file path, `:memory:`, or a URL **without its password**.
    package let location: String
    /// Whether another process or machine can commit to this database: `false` only for an in-memory SQLite
    /// database, which has nothing for ``FeedBackend/makeChangeWatch(watchFiles:)`` to watch.
    package let othersCanWrite: Bool
    /// How many write transactions can do useful work at once: SQLite 1 (one writer per database file); PostgreSQL
    /// 2, or 1 with a single pooled connection (`min(2, maximumConnections)`): while one batch appends its events
    /// and waits for its commit's WAL flush, the next does its row work; more at once would each pay a flush of their
    /// own, serialized on the event-log head. The domain's group commit runs up to this many batches at once,
    /// grouping callers only beyond it.
    package let concurrentWriteTransactions: Int
    /// Whether the key of a deleted user or post may be given to a row inserted later (SQLite's rowid does, for the
    /// highest key; PostgreSQL's sequences never): where it may, a key read in one transaction is not cached for the
    /// next, since another process may have erased its user since.
    package let reusesKeys: Bool

    package init(name: String, location: String, othersCanWrite: Bool, concurrentWriteTransactions: Int, reusesKeys: Bool) {
        self.name = name
        self.location = location
        self.othersCanWrite = othersCanWrite
        self.concurrentWriteTransactions = concurrentWriteTransactions
        self.reusesKeys = reusesKeys
    }
}

/// A database's schema versions.
public struct SchemaStatus: Sendable, Hashable {
    /// The database's schema version (0 when empty).
    public let databaseVersion: Int
    /// The newest version this binary knows.
    public let binaryVersion: Int
    /// The migrations the database still needs, oldest first: version and name.
    public let pending: [MigrationName]

    /// A status from its parts.
    public init(databaseVersion: Int, binaryVersion: Int, pending: [MigrationName]) {
        self.databaseVersion = databaseVersion
        self.binaryVersion = binaryVersion
        self.pending = pending
    }
}

/// A migration's version and name.
public struct MigrationName: Sendable, Hashable, Codable {
    /// Its version (the file's number).
    public let version: Int
    /// Its name (the file's name without number and extension).
    public let name: String

    /// A migration name from its parts.
    public init(version: Int, name: String) {
        self.version = version
        self.name = name
    }
}
