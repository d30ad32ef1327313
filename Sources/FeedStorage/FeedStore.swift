public import FeedSQLite

/// A FeedSync database: the SQLite file (or in-memory database), migrated to this binary's schema.
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
    /// The migrator whose schema this store was brought to.
    public let migrator: Migrator

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

    /// Opens a private in-memory database with the schema applied (for tests and previews).
    public static func inMemory(migrator: Migrator = .embedded) throws(StorageError) -> FeedStore {
        try FeedStore(location: .inMemory, configuration: Configuration(), migrator: migrator)
    }

    /// Opens the database at `location` and migrates it.
    public init(location: Connection.Location, configuration: Configuration, migrator: Migrator) throws(StorageError) {
        let path: String? = if case .file(let path) = location { path } else { nil }
        do {
            self.database = try Database(location: location, configuration: configuration)
        } catch {
            throw StorageError(error, path: path)
        }
        self.migrator = migrator
        do {
            if configuration.readOnly {
                let pending = try database.unsafeRead { db in
                    (try migrator.pendingMigrations(db), try migrator.currentVersion(db))
                }
                if !pending.0.isEmpty {
                    throw StorageError.migrationsPending(databaseVersion: pending.1, binaryVersion: migrator.latestVersion)
                }
            } else {
                try migrator.migrate(database)
            }
        } catch let error as StorageError {
            database.close()
            throw error
        } catch let error as SQLiteError {
            database.close()
            throw StorageError(error, path: path)
        } catch {
            database.close()
            throw StorageError.sqlite(SQLiteError(code: .error, message: "\(error)"))
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

    /// Closes every connection.
    public func close() {
        database.close()
    }

    static func storageError(_ error: any Error, path: String?) -> any Error {
        if let error = error as? SQLiteError { return StorageError(error, path: path) }
        return error
    }
}
