public import FeedCore
internal import FeedMigrations
internal import FeedSQLite
internal import Foundation

/// ``FeedStore`` is the SQLite backend: a file (or in-memory) database with one writer connection and a pool of
/// readers.
extension FeedStore: FeedBackend {
    public var location: String { path ?? ":memory:" }

    /// One writer per database file; only a file has other processes that can write it.
    package var traits: FeedBackendTraits {
        FeedBackendTraits(
            name: "SQLite", location: location, othersCanWrite: path != nil, concurrentWriteTransactions: 1, reusesKeys: true)
    }

    /// SQLite has no connection to lose and retries nothing (a busy database waits in its busy handler): nothing is
    /// posted here.
    package var notices: BackendNotices { noticeSink }

    /// Runs `body` in an IMMEDIATE transaction on the writer connection; `afterCommit` runs after `COMMIT`, still
    /// holding the writer connection, so the commits of this process reach it in commit order.
    package func write<T>(_ body: (any FeedTransaction) throws -> T, afterCommit: (T) -> Void) throws -> T {
        do {
            return try database.writeWithoutTransaction { db in
                let tx = SQLiteTransaction(db, likeKeys: likeKeys)
                defer { if tx.securelyDeleting { Self.endSecureDelete(on: db) } }
                let result = try db.transaction(.immediate) { _ in try body(tx) }
                afterCommit(result)
                return result
            }
        } catch {
            throw Self.storageError(error, path: path)
        }
    }

    /// After a transaction that deleted rows with `secure_delete` on: turns it off again and checkpoints the WAL with
    /// `TRUNCATE`, so that the old page images of the deleted rows leave the `-wal` file (the database file's pages
    /// were zeroed). Readers that hold the WAL make it retry, a few times; a checkpoint that still cannot finish
    /// leaves the work to the next one.
    private static func endSecureDelete(on db: Connection) {
        _ = try? db.execute("PRAGMA secure_delete = OFF")
        for attempt in 0..<20 {
            let busy = (try? db.fetchInt64("PRAGMA wal_checkpoint(TRUNCATE)")) ?? 1
            if busy == 0 { return }
            Thread.sleep(forTimeInterval: 0.005 * Double(attempt + 1))
        }
    }

    /// Applies the units in one IMMEDIATE transaction, then `join`'s units in the same transaction until it returns
    /// none (the writer is held, so there is no lock order to keep between the calls), and commits.
    package func commitLikes(
        _ units: [LikeUnit], join: (_ count: Int) -> [LikeUnit],
        afterCommit: ([Result<[LikeOutcome], StorageError>]) -> Void
    ) throws -> [Result<[LikeOutcome], StorageError>] {
        try write(
            { tx in
                var outcomes = try tx.applyLikes(units)
                while case let more = join(outcomes.count), !more.isEmpty {
                    outcomes += try tx.applyLikes(more)
                }
                return outcomes
            }, afterCommit: afterCommit)
    }

    package func read<T>(_ body: (any FeedTransaction) throws -> T) throws -> T {
        try read { db in try body(SQLiteTransaction(db)) }
    }

    package func readOnce<T>(_ body: (any FeedTransaction) throws -> T) throws -> T {
        try unsafeRead { db in try body(SQLiteTransaction(db)) }
    }

    public var isWritingOnCurrentThread: Bool { database.isWritingOnCurrentThread }

    public func schemaStatus() throws -> SchemaStatus {
        try unsafeRead { db in
            SchemaStatus(
                databaseVersion: try migrator.currentVersion(db), binaryVersion: migrator.latestVersion,
                pending: try migrator.pendingMigrations(db).map { MigrationName(version: $0.version, name: $0.name) })
        }
    }

    /// Runs the load in one transaction, then checkpoints the write-ahead log into the database file on this thread
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`), as SQLite's own checkpoint at that commit would: a load leaves its whole
    /// size in the log, and copying it later on the checkpoint thread would compete with the first reads and writes
    /// that follow the load (W2's first pages after its seed: p99 ~3× raw SQLite's). A checkpoint that cannot finish
    /// (a reader holds an older snapshot) is left to the checkpoint thread.
    package func bulkLoad<T>(_ body: (any FeedBulkLoader) throws -> T) throws -> T {
        let result = try BulkLoader.load(into: self) { loader in try body(loader) }
        try? database.writeWithoutTransaction { db in try db.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
        return result
    }

    package func makeChangeWatch(watchFiles: Bool) throws -> any FeedChangeWatch {
        guard let path else {
            throw StorageError.cannotOpen(path: ":memory:", reason: "an in-memory database has no other processes to follow")
        }
        return try SQLiteChangeWatch(path: path, configuration: database.configuration, watchFiles: watchFiles)
    }
}

extension BulkLoader: FeedBulkLoader {}
