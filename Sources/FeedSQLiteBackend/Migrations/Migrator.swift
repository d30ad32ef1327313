internal import FeedCore
public import FeedSQLite
public import FeedMigrations
public import Foundation

/// Applies the numbered SQL migrations in order and refuses databases it cannot vouch for.
///
/// Each migration runs in its own IMMEDIATE transaction together with its record in `schema_migrations`
/// (version, name, checksum, time) and `PRAGMA user_version`. Foreign keys are off while a migration runs and
/// checked with `PRAGMA foreign_key_check` before it commits.
///
/// Before it changes anything the migrator validates the database: a recorded checksum that differs from the
/// file's, a migration this binary does not know, or a `user_version` above the newest known version are refused
/// with a ``StorageError`` naming both versions, and the database is left untouched.
///
/// ```swift
/// let database = try Database(path: path)
/// try Migrator.embedded.migrate(database)
/// ```
///
/// Related SQLite documentation: <https://www.sqlite.org/pragma.html#pragma_user_version>
public struct Migrator: Sendable {
    /// The migrations, sorted by version.
    public let migrations: [Migration]

    /// The migrations embedded in this binary from `Migrations/sql/`.
    /// Their checksums were computed at build time (`EmbeddedMigrationFile.sha256Checksums`).
    public static let embedded = Migrator(
        migrations: zip(EmbeddedMigrationFile.all, EmbeddedMigrationFile.sha256Checksums).map(Migration.init(file:checksum:)))

    /// Creates a migrator for `migrations`.
    ///
    /// - Precondition: versions are unique.
    public init(migrations: [Migration]) {
        let sorted = migrations.sorted { $0.version < $1.version }
        precondition(zip(sorted, sorted.dropFirst()).allSatisfy { $0.version < $1.version }, "API Violation: duplicate migration version")
        self.migrations = sorted
    }

    /// The newest schema version this migrator knows.
    public var latestVersion: Int { migrations.last?.version ?? 0 }

    // MARK: - Inspecting

    /// A migration recorded as applied in a database.
    public struct AppliedMigration: Sendable, Hashable {
        /// The version it brought the database to.
        public let version: Int
        /// Its name.
        public let name: String
        /// The checksum recorded when it was applied.
        public let checksum: String
        /// When it was applied.
        public let appliedAt: Date
    }

    /// The migrations recorded in `db`, oldest first; empty for a new database.
    public func appliedMigrations(_ db: Connection) throws -> [AppliedMigration] {
        let hasTable =
            try db.fetchInt64(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'") ?? 0
        guard hasTable > 0 else { return [] }
        return try db.fetchAll("SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version") { row in
            AppliedMigration(
                version: row.int(at: 0), name: row.string(at: 1), checksum: row.string(at: 2),
                appliedAt: Date(timeIntervalSince1970: Double(row.int64(at: 3)) / 1000))
        }
    }

    /// The schema version recorded in `db` (the highest of `user_version` and the newest applied migration).
    public func currentVersion(_ db: Connection) throws -> Int {
        let userVersion = Int(try db.fetchInt64("PRAGMA user_version") ?? 0)
        return max(userVersion, try appliedMigrations(db).last?.version ?? 0)
    }

    /// The migrations `db` still needs, after validating it.
    ///
    /// - Throws: ``StorageError/schemaNewer(databaseVersion:binaryVersion:)``,
    ///   ``StorageError/unknownMigration(version:name:binaryVersion:)`` or
    ///   ``StorageError/migrationChanged(version:name:recordedChecksum:fileChecksum:)`` for a database this binary
    ///   must not touch.
    public func pendingMigrations(_ db: Connection) throws -> [Migration] {
        let applied = try appliedMigrations(db)
        // Linear searches over a handful of migrations: no Dictionary or Set type is instantiated here, which at
        // process start costs more than the whole check (a scan of the binary's protocol conformances).
        for record in applied {
            guard let migration = migrations.first(where: { $0.version == record.version }) else {
                throw StorageError.unknownMigration(version: record.version, name: record.name, binaryVersion: latestVersion)
            }
            guard migration.checksum == record.checksum else {
                throw StorageError.migrationChanged(
                    version: record.version, name: record.name,
                    recordedChecksum: record.checksum, fileChecksum: migration.checksum)
            }
        }
        let userVersion = Int(try db.fetchInt64("PRAGMA user_version") ?? 0)
        if userVersion > latestVersion {
            throw StorageError.schemaNewer(databaseVersion: userVersion, binaryVersion: latestVersion)
        }
        return migrations.filter { migration in !applied.contains { $0.version == migration.version } }
    }

    /// Whether `db` has every migration of this migrator (after validating it).
    public func hasCompletedMigrations(_ db: Connection) throws -> Bool {
        try pendingMigrations(db).isEmpty
    }

    // MARK: - Migrating

    /// Validates `database` and applies every pending migration up to `target` (all by default), in order.
    ///
    /// Safe to run from several processes at once: each migration re-checks, inside its IMMEDIATE transaction,
    /// that nobody applied it meanwhile. Running it twice is a no-op.
    ///
    /// - Returns: the versions applied by this call.
    /// - Throws: ``StorageError`` for a database that must not be touched; ``SQLiteError`` (wrapped) when a
    ///   migration fails, in which case that migration is rolled back entirely.
    @discardableResult
    public func migrate(_ database: Database, upTo target: Int? = nil, now: Date = Date()) throws -> [Int] {
        let limit = target ?? latestVersion
        var applied: [Int] = []
        try database.writeWithoutTransaction { db in
            // Validate before writing anything, outside any transaction.
            guard try !pendingMigrations(db).filter({ $0.version <= limit }).isEmpty else { return }
            // SQLite ignores PRAGMA foreign_keys inside a transaction, so toggle it around each one.
            try db.execute("PRAGMA foreign_keys = OFF")
            defer { _ = try? db.execute("PRAGMA foreign_keys = ON") }
            for migration in migrations where migration.version <= limit {
                let didApply = try db.transaction(.immediate) { db -> Bool in
                    // Re-validate under the write lock: another process may have migrated meanwhile.
                    guard try pendingMigrations(db).contains(migration) else { return false }
                    try db.execute(
                        """
                        CREATE TABLE IF NOT EXISTS schema_migrations (
                            version    INTEGER PRIMARY KEY,
                            name       TEXT    NOT NULL,
                            checksum   TEXT    NOT NULL,
                            applied_at INTEGER NOT NULL
                        )
                        """)
                    try db.execute(migration.sql)
                    if try db.fetchOne("PRAGMA foreign_key_check", decode: { $0.string(at: 0) }) != nil {
                        throw SQLiteError(
                            code: .constraintForeignKey, message: "migration \(migration.version) leaves foreign key violations")
                    }
                    try db.run(
                        "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
                        migration.version, migration.name, migration.checksum, Int64(now.timeIntervalSince1970 * 1000))
                    // PRAGMA takes no parameters; the version is an integer from the migration list, not input.
                    try db.execute("PRAGMA user_version = " + String(migration.version))
                    return true
                }
                if didApply { applied.append(migration.version) }
            }
        }
        return applied
    }
}
