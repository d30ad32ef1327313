internal import FeedCore
internal import FeedChecksum
public import FeedMigrations
internal import Foundation

/// Applies the numbered PostgreSQL migrations in order and refuses databases it cannot vouch for — the rules of the
/// SQLite backend's `Migrator`.
///
/// - Each migration runs in its own transaction together with its row in `schema_migrations (version, name,
///   checksum, applied_at)`.
/// - Before anything is written the database is validated: a recorded version above the newest this binary knows
///   (``StorageError/schemaNewer(databaseVersion:binaryVersion:)``), a recorded migration it does not have
///   (``StorageError/unknownMigration(version:name:binaryVersion:)``) or a recorded checksum that differs from the
///   file's (``StorageError/migrationChanged(version:name:recordedChecksum:fileChecksum:)``) is refused.
/// - Concurrency: migrating happens on a dedicated session holding `pg_advisory_lock(`` advisoryLockKey ``)`; the
///   database is validated again under the lock, so any number of processes opening a new database at once apply
///   each migration exactly once. A database that needs nothing is not locked at all.
public struct PostgresMigrator: Sendable {
    /// The migrations, sorted by version.
    public let migrations: [Migration]

    /// The migrations embedded in this binary from `Migrations/postgresql/` (checksums computed at build time).
    public static let embedded = PostgresMigrator(
        migrations: zip(EmbeddedMigrationFile.postgresql, EmbeddedMigrationFile.postgresqlChecksums).map(
            Migration.init(file:checksum:)))

    /// The session-level advisory lock migrating takes: `FeedSync` in ASCII, as a 64-bit key.
    public static let advisoryLockKey: Int64 = 0x4665_6564_5379_6E63

    /// A migrator for `migrations`.
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

    /// A migration recorded as applied.
    struct AppliedMigration {
        let version: Int
        let name: String
        let checksum: String
    }

    /// The migrations recorded in the database, oldest first; empty for a new database.
    func appliedMigrations(_ connection: PostgresConnection) throws(PostgresFailure) -> [AppliedMigration] {
        guard try connection.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").bool(0, 0) == true else { return [] }
        let result = try connection.execute("SELECT version, name, checksum FROM schema_migrations ORDER BY version")
        return (0..<result.rowCount).map { row in
            AppliedMigration(
                version: Int(result.int64(row, 0) ?? 0), name: result.string(row, 1) ?? "", checksum: result.string(row, 2) ?? "")
        }
    }

    /// The database's status after validating it: its version and the migrations it still needs.
    ///
    /// - Throws: ``StorageError/schemaNewer(databaseVersion:binaryVersion:)``,
    ///   ``StorageError/unknownMigration(version:name:binaryVersion:)``,
    ///   ``StorageError/migrationChanged(version:name:recordedChecksum:fileChecksum:)``, or the mapped failure.
    func validate(_ connection: PostgresConnection, location: String) throws(StorageError) -> (version: Int, pending: [Migration]) {
        let applied: [AppliedMigration]
        do {
            applied = try appliedMigrations(connection)
        } catch {
            throw error.storageError(location: location)
        }
        let version = applied.last?.version ?? 0
        if version > latestVersion { throw .schemaNewer(databaseVersion: version, binaryVersion: latestVersion) }
        for record in applied {
            guard let migration = migrations.first(where: { $0.version == record.version }) else {
                throw .unknownMigration(version: record.version, name: record.name, binaryVersion: latestVersion)
            }
            guard migration.checksum == record.checksum else {
                throw .migrationChanged(
                    version: record.version, name: record.name, recordedChecksum: record.checksum, fileChecksum: migration.checksum)
            }
        }
        return (version, migrations.filter { migration in !applied.contains { $0.version == migration.version } })
    }

    /// The schema status of the database on `connection`.
    func status(_ connection: PostgresConnection, location: String) throws(StorageError) -> SchemaStatus {
        let (version, pending) = try validate(connection, location: location)
        return SchemaStatus(
            databaseVersion: version, binaryVersion: latestVersion,
            pending: pending.map { MigrationName(version: $0.version, name: $0.name) })
    }

    // MARK: - Migrating

    /// Validates the database and applies every pending migration, under the advisory lock.
    ///
    /// - Parameter connection: a dedicated session (the lock is held by the session until it is released).
    /// - Returns: the versions applied by this call (empty when another process applied them).
    @discardableResult
    func migrate(_ connection: PostgresConnection, location: String, now: Date = Date()) throws(StorageError) -> [Int] {
        // Validate first without the lock: a current database is neither locked nor written.
        guard try !validate(connection, location: location).pending.isEmpty else { return [] }
        // Waiting for another process's migration and running a migration's script may take as long as they take:
        // no response deadline while the lock is wanted or held.
        let responseTimeout = connection.responseTimeout
        connection.responseTimeout = nil
        defer { connection.responseTimeout = responseTimeout }
        do {
            try connection.execute("SELECT pg_advisory_lock($1)", [.integer(Self.advisoryLockKey)])
        } catch {
            throw error.sqlState == "55P03" ? .busy(error.databaseFailure) : error.storageError(location: location)
        }
        defer { _ = try? connection.execute("SELECT pg_advisory_unlock($1)", [.integer(Self.advisoryLockKey)]) }
        // Another process may have migrated while this one waited.
        let pending = try validate(connection, location: location).pending
        var applied: [Int] = []
        for migration in pending {
            do throws(PostgresFailure) {
                try connection.executeScript("BEGIN ISOLATION LEVEL READ COMMITTED READ WRITE")
                try connection.executeScript(
                    """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version    INTEGER PRIMARY KEY,
                        name       TEXT    NOT NULL,
                        checksum   TEXT    NOT NULL,
                        applied_at BIGINT  NOT NULL
                    )
                    """)
                do {
                    try connection.executeScript(migration.sql)
                } catch {
                    // Name the migration rather than quote the whole script.
                    throw PostgresFailure(
                        sqlState: error.sqlState, message: error.message, constraint: error.constraint, table: error.table,
                        sql: "migration \(migration.version) (\(migration.name))", connectionBroken: error.connectionBroken)
                }
                try connection.execute(
                    "INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)",
                    [.integer(Int64(migration.version)), .text(migration.name), .text(migration.checksum), .integer(millis(now))])
                try connection.executeScript("COMMIT")
            } catch {
                _ = try? connection.executeScript("ROLLBACK")
                throw error.sqlState == "55P03" ? .busy(error.databaseFailure) : error.storageError(location: location)
            }
            applied.append(migration.version)
        }
        return applied
    }
}
