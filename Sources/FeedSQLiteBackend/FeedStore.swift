public import FeedCore
public import FeedMigrations
public import FeedSQLite

/// A FeedSync database: the SQLite file (or in-memory database), migrated to this binary's schema — or, opened
/// with ``OpenMode/readCurrent`` or ``OpenMode/inspect``, only read.
///
/// `FeedStore` is `Sendable`; share one per database file in a process. Writes are serialized IMMEDIATE
/// transactions on one writer connection; reads use reader connections concurrently. Errors are
/// ``StorageError``s.
///
/// ```swift
/// let store = try FeedStore(path: "/tmp/feed.sqlite")
/// try store.write { db in try UserRepository(db).insert(id: "user1", name: "Ada", at: Date()) }
/// let users = try store.read { db in try UserRepository(db).all() }
/// ```
public final class FeedStore: Sendable {
    /// The underlying SQLite database.
    public let database: Database
    /// The migrator whose schema this store was brought to (or, for a store opened without migrating, checked
    /// against).
    public let migrator: Migrator
    /// How the store was opened.
    public let mode: OpenMode
    /// User and post keys for like commands (``SQLiteTransaction/applyLikes(_:)``).
    let likeKeys = LikeKeyCache()
    /// Where the store would report reconnects and retries, for the seam (it has none to report).
    let noticeSink = BackendNotices()

    /// How opening a store treats the database's schema. Every mode first validates the database with
    /// ``Migrator/pendingMigrations(_:)`` — before anything writes to the file, even before it is switched to WAL —
    /// and refuses, leaving it byte-for-byte unchanged, one this binary must not touch: `schemaNewer`,
    /// `unknownMigration`, `migrationChanged`.
    public enum OpenMode: Sendable, Hashable {
        /// Read and write: switch the file to WAL and apply the pending migrations. The default.
        case migrate
        /// Read only, nothing migrated or written; a database that needs migrations is refused with
        /// ``StorageError/migrationsPending(databaseVersion:binaryVersion:)``.
        case readCurrent
        /// Read only, nothing migrated or written, at whatever schema version the database has (up to this
        /// binary's): for reporting its version and pending migrations. Tables of newer migrations may be missing.
        case inspect
    }

    /// Opens (creating if needed) and migrates the database file at `path`.
    ///
    /// - Parameters:
    ///   - path: the database file; its directory must exist.
    ///   - configuration: busy policy and connection options; with `readOnly`, the schema must be current.
    ///   - migrator: the migrations to apply (this binary's embedded ones by default).
    /// - Throws: ``StorageError``: `notADatabase`, `cannotOpen`, `schemaNewer`, `unknownMigration`,
    ///   `migrationChanged`, `migrationsPending` (read-only), `busy`, `readOnly`.
    public convenience init(
        path: String, configuration: Configuration = Configuration(), migrator: Migrator = .embedded
    ) throws(StorageError) {
        try self.init(location: .file(path), configuration: configuration, migrator: migrator)
    }

    /// Opens the existing database file at `path` in `mode`: ``OpenMode/readCurrent`` and ``OpenMode/inspect``
    /// open it read-only and never write to it.
    ///
    /// ```swift
    /// let store = try FeedStore(path: path, mode: .inspect)
    /// let pending = try store.pendingMigrations()   // what `FeedStore(path: path)` would apply
    /// ```
    ///
    /// - Throws: ``StorageError``, as ``init(path:configuration:migrator:)``; `cannotOpen` for a missing file in a
    ///   read-only mode; `migrationsPending` for ``OpenMode/readCurrent``.
    public convenience init(
        path: String, mode: OpenMode, configuration: Configuration = Configuration(), migrator: Migrator = .embedded
    ) throws(StorageError) {
        try self.init(location: .file(path), configuration: configuration, migrator: migrator, mode: mode)
    }

    /// Opens a private in-memory database with the schema applied (for tests and previews).
    public static func inMemory(migrator: Migrator = .embedded) throws(StorageError) -> FeedStore {
        try FeedStore(location: .inMemory, configuration: Configuration(), migrator: migrator)
    }

    /// Opens the database at `location` in `mode` (migrating by default).
    ///
    /// - Parameters:
    ///   - location: a file, or ``Connection/Location/inMemory`` (which only ``OpenMode/migrate`` can open).
    ///   - configuration: busy policy and connection options. `readOnly` turns ``OpenMode/migrate`` into
    ///     ``OpenMode/readCurrent``; the read-only modes set it.
    ///   - migrator: the migrations the schema is checked against and brought to.
    ///   - mode: how the schema is treated.
    /// - Throws: ``StorageError``; the database is closed again.
    public init(
        location: Connection.Location, configuration: Configuration, migrator: Migrator, mode: OpenMode = .migrate
    ) throws(StorageError) {
        let path: String? = if case .file(let path) = location { path } else { nil }
        let mode: OpenMode = configuration.readOnly && mode == .migrate ? .readCurrent : mode
        var configuration = configuration
        if mode != .migrate { configuration.readOnly = true }
        do {
            // Validation runs before the writer switches the file to WAL: a database this binary must not touch is
            // refused with nothing written.
            self.database = try Database(location: location, configuration: configuration) { db in
                let pending = try migrator.pendingMigrations(db)
                if mode == .readCurrent, !pending.isEmpty {
                    throw StorageError.migrationsPending(
                        databaseVersion: try migrator.currentVersion(db), binaryVersion: migrator.latestVersion)
                }
            }
        } catch {
            throw Self.openError(error, path: path)
        }
        self.migrator = migrator
        self.mode = mode
        guard mode == .migrate else { return }
        do {
            try migrator.migrate(database)
        } catch {
            database.close()
            throw Self.openError(error, path: path)
        }
    }

    private static func openError(_ error: any Error, path: String?) -> StorageError {
        switch error {
        case let error as StorageError: error
        case let error as SQLiteError: StorageError(error, path: path)
        default: StorageError.sqliteFailure("\(error)")
        }
    }

    /// The database file's path, or `nil` in memory.
    public var path: String? { database.path }

    // MARK: - Access

    /// Runs `body` in an IMMEDIATE write transaction: committed when it returns, rolled back when it throws.
    ///
    /// - Throws: what `body` throws; SQLite failures arrive as ``StorageError``.
    public func write<T>(_ body: (Connection) throws -> T) throws -> T {
        do {
            return try database.write(body)
        } catch {
            throw Self.storageError(error, path: path)
        }
    }

    /// Runs `body` in a read transaction on a reader connection (one consistent snapshot).
    public func read<T>(_ body: (Connection) throws -> T) throws -> T {
        do {
            return try database.read(body)
        } catch {
            throw Self.storageError(error, path: path)
        }
    }

    /// Runs `body` on a reader connection in autocommit mode: cheapest for one query.
    public func unsafeRead<T>(_ body: (Connection) throws -> T) throws -> T {
        do {
            return try database.unsafeRead(body)
        } catch {
            throw Self.storageError(error, path: path)
        }
    }

    /// The schema version of the database and of this binary.
    public func schemaVersion() throws -> (database: Int, binary: Int) {
        let current = try unsafeRead { db in try migrator.currentVersion(db) }
        return (current, migrator.latestVersion)
    }

    /// The migrations the database still needs: empty for a store opened with ``OpenMode/migrate`` or
    /// ``OpenMode/readCurrent``; what ``OpenMode/migrate`` would apply for one opened with ``OpenMode/inspect``.
    public func pendingMigrations() throws -> [Migration] {
        try unsafeRead { db in try migrator.pendingMigrations(db) }
    }

    /// Closes every connection.
    public func close() {
        database.close()
    }

    static func storageError(_ error: any Error, path: String?) -> any Error {
        if let error = error as? SQLiteError { return StorageError(error, path: path) }
        return error
    }
}
