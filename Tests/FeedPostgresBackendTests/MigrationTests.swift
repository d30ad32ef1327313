import FeedCore
import FeedMigrations
import FeedPostgresBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// Blocks: opener threads wait at a gate to migrate one database at once; joins them.
@Suite(.ownThreads) struct MigrationTests {
    /// The tables of the database and its recorded migrations: what "nothing written" compares.
    private func snapshot(_ url: String) throws -> [[DatabaseValue]] {
        let tables = try PostgresAdmin.execute(
            url: url, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name")
        let hasRecords = try PostgresAdmin.execute(url: url, "SELECT to_regclass('schema_migrations') IS NOT NULL")
        let records =
            hasRecords.first?.first == .integer(1)
            ? try PostgresAdmin.execute(url: url, "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version")
            : []
        return tables + [["--"]] + records
    }

    @Test func aFreshDatabaseIsMigratedToTheLatestVersion() throws {
        guard let db = try TestDatabase.make("migrate_fresh") else { return }
        let status = try db.backend.schemaStatus()
        #expect(status.databaseVersion == PostgresMigrator.embedded.latestVersion)
        #expect(status.binaryVersion == PostgresMigrator.embedded.latestVersion)
        #expect(status.pending.isEmpty)
        #expect(PostgresMigrator.embedded.migrations.map(\.version) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12])
        let records = try db.admin("SELECT version, checksum FROM schema_migrations ORDER BY version")
        #expect(records.map { $0[0] } == PostgresMigrator.embedded.migrations.map { .integer(Int64($0.version)) })
        #expect(records.map { $0[1] } == PostgresMigrator.embedded.migrations.map { .text($0.checksum) })
        let tables = try db.admin(
            """
            SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'
            AND table_name IN ('users', 'posts', 'likes', 'events', 'event_log_head', 'subscriber_cursors', 'log_state')
            """)
        #expect(tables == [[.integer(7)]])
        #expect(try db.admin("SELECT last_seq FROM event_log_head") == [[.integer(0)]])
    }

    @Test func theEmbeddedFilesAreTheFilesOfMigrationsPostgresql() throws {
        let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Migrations/postgresql")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(EmbeddedMigrationFile.postgresql.map(\.fileName) == names)
        for file in EmbeddedMigrationFile.postgresql {
            #expect(try Data(contentsOf: folder.appendingPathComponent(file.fileName)) == Data(file.bytes))
        }
        #expect(EmbeddedMigrationFile.postgresqlChecksums.count == EmbeddedMigrationFile.postgresql.count)
        #expect(
            EmbeddedMigrationFile.all.map(\.fileName) == [
                "0001_create_schema.sql", "0002_bulk_load_baseline.sql", "0003_like_counts_in_code.sql", "0004_sync.sql",
                "0005_api_tokens.sql", "0006_likes_without_post_index.sql", "0007_deleting.sql",
                "0008_replica_cursor_check.sql",
            ])
        #expect(EmbeddedMigrationFile.postgresql.last?.fileName == "0012_batch_locks_by_index.sql")
    }

    @Test func reopeningAMigratedDatabaseWritesNothing() throws {
        guard let db = try TestDatabase.make("migrate_reopen") else { return }
        let before = try snapshot(db.url)
        let again = try PostgresBackend(url: db.url)
        again.close()
        #expect(try snapshot(db.url) == before)
    }

    @Test func aDatabaseOfANewerVersionIsRefusedWithNothingWritten() throws {
        guard let db = try TestDatabase.make("migrate_newer") else { return }
        let newer = PostgresMigrator(
            migrations: PostgresMigrator.embedded.migrations + [
                Migration(version: 99, name: "future", sql: "CREATE TABLE future (x int);")
            ])
        try PostgresBackend(url: db.url, migrator: newer).close()
        let before = try snapshot(db.url)
        for mode in [PostgresOpenMode.migrate, .readCurrent, .inspect] {
            let error = try #require(throws: StorageError.self) { try PostgresBackend(url: db.url, mode: mode) }
            #expect(error == .schemaNewer(databaseVersion: 99, binaryVersion: PostgresMigrator.embedded.latestVersion))
        }
        #expect(try snapshot(db.url) == before)
    }

    @Test func aChangedMigrationIsRefusedWithNothingWritten() throws {
        guard let database = try PostgresTestDatabase.make("migrate_changed") else { return }
        defer { database.drop() }
        let v1 = Migration(version: 1, name: "a", sql: "CREATE TABLE a (x int);")
        try PostgresBackend(url: database.url, migrator: PostgresMigrator(migrations: [v1])).close()
        let before = try snapshot(database.url)
        let edited = PostgresMigrator(migrations: [
            Migration(version: 1, name: "a", sql: "CREATE TABLE a (x int, y int);"),
            Migration(version: 2, name: "b", sql: "CREATE TABLE b (x int);"),
        ])
        let error = try #require(throws: StorageError.self) { try PostgresBackend(url: database.url, migrator: edited) }
        #expect(
            error
                == .migrationChanged(
                    version: 1, name: "a", recordedChecksum: v1.checksum, fileChecksum: edited.migrations[0].checksum))
        #expect(try snapshot(database.url) == before)
    }

    @Test func anUnknownMigrationIsRefusedWithNothingWritten() throws {
        guard let database = try PostgresTestDatabase.make("migrate_unknown") else { return }
        defer { database.drop() }
        let v1 = Migration(version: 1, name: "a", sql: "CREATE TABLE a (x int);")
        let v2 = Migration(version: 2, name: "b", sql: "CREATE TABLE b (x int);")
        let v3 = Migration(version: 3, name: "c", sql: "CREATE TABLE c (x int);")
        try PostgresBackend(url: database.url, migrator: PostgresMigrator(migrations: [v1, v2])).close()
        let before = try snapshot(database.url)
        let error = try #require(throws: StorageError.self) {
            try PostgresBackend(url: database.url, migrator: PostgresMigrator(migrations: [v1, v3]))
        }
        #expect(error == .unknownMigration(version: 2, name: "b", binaryVersion: 3))
        #expect(try snapshot(database.url) == before)
    }

    @Test func readOnlyModesNeverMigrate() throws {
        guard let database = try PostgresTestDatabase.make("migrate_readonly") else { return }
        defer { database.drop() }
        let v1 = Migration(version: 1, name: "a", sql: "CREATE TABLE a (x int);")
        let v2 = Migration(version: 2, name: "b", sql: "CREATE TABLE b (x int);")
        try PostgresBackend(url: database.url, migrator: PostgresMigrator(migrations: [v1])).close()
        let before = try snapshot(database.url)
        let both = PostgresMigrator(migrations: [v1, v2])
        let error = try #require(throws: StorageError.self) {
            try PostgresBackend(url: database.url, mode: .readCurrent, migrator: both)
        }
        #expect(error == .migrationsPending(databaseVersion: 1, binaryVersion: 2))
        let inspector = try PostgresBackend(url: database.url, mode: .inspect, migrator: both)
        defer { inspector.close() }
        #expect(
            try inspector.schemaStatus()
                == SchemaStatus(databaseVersion: 1, binaryVersion: 2, pending: [MigrationName(version: 2, name: "b")]))
        #expect(throws: StorageError.readOnly(path: inspector.location)) {
            try inspector.write({ tx in try tx.userStatements.execute("CREATE TABLE c (x int)") }, afterCommit: { _ in })
        }
        #expect(try snapshot(database.url) == before)
    }

    @Test func tenConcurrentOpenersMigrateExactlyOnce() throws {
        guard let database = try PostgresTestDatabase.make("migrate_ten") else { return }
        defer { database.drop() }
        let url = database.url
        let gate = DispatchSemaphore(value: 0)
        let failures = Shared<[String]>([])
        let threads = (0..<10).map { index in
            spawn("opener \(index)") {
                gate.wait()
                do {
                    try PostgresBackend(url: url).close()
                } catch {
                    failures.update { $0.append("opener \(index): \(error)") }
                }
            }
        }
        for _ in 0..<10 { gate.signal() }
        join(threads)
        #expect(failures.current.isEmpty)
        let records = try PostgresAdmin.execute(
            url: url, "SELECT version, count(*) FROM schema_migrations GROUP BY version ORDER BY version")
        #expect(records == PostgresMigrator.embedded.migrations.map { [.integer(Int64($0.version)), .integer(1)] })
        #expect(try PostgresAdmin.execute(url: url, "SELECT count(*) FROM event_log_head") == [[.integer(1)]])
        #expect(try PostgresAdmin.execute(url: url, "SELECT count(*) FROM log_state") == [[.integer(1)]])
    }
}
