import FeedCore
import FeedChecksum
import FeedMigrations
import FeedSQLite
@testable import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import Testing

@Suite struct MigratorTests {
    @Test func migratesAnEmptyDatabaseToTheLatestVersion() throws {
        let dir = TemporaryDirectory()
        let database = try Database(path: dir.file("db.sqlite"))
        let applied = try Migrator.embedded.migrate(database)
        #expect(applied == Migrator.embedded.migrations.map(\.version))
        try database.read { db throws in
            #expect(try Migrator.embedded.currentVersion(db) == Migrator.embedded.latestVersion)
            #expect(try db.fetchInt64("PRAGMA user_version") == Int64(Migrator.embedded.latestVersion))
            let records = try Migrator.embedded.appliedMigrations(db)
            #expect(records.map(\.checksum) == Migrator.embedded.migrations.map(\.checksum))
            #expect(
                try db.fetchInt64(
                    "SELECT count(*) FROM sqlite_schema WHERE name IN ('users','posts','likes','events','subscriber_cursors')") == 5)
        }
    }

    @Test func migratingTwiceIsANoOp() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let database = try Database(path: path)
        try Migrator.embedded.migrate(database)
        let schema = try database.read { db in try db.fetchAll("SELECT sql FROM sqlite_schema ORDER BY name") { $0.string(at: 0) } }
        #expect(try Migrator.embedded.migrate(database).isEmpty)
        let again = try database.read { db in try db.fetchAll("SELECT sql FROM sqlite_schema ORDER BY name") { $0.string(at: 0) } }
        #expect(schema == again)
        #expect(
            try database.read { db in try db.fetchInt64("SELECT count(*) FROM schema_migrations") }
                == Int64(Migrator.embedded.migrations.count))
    }

    @Test func migratesUpToEveryPrefix() throws {
        let migrator = Migrator(migrations: [
            Migration(version: 1, name: "a", sql: "CREATE TABLE a (x);"),
            Migration(version: 2, name: "b", sql: "CREATE TABLE b (x);"),
            Migration(version: 3, name: "c", sql: "CREATE TABLE c (x);"),
        ])
        for target in 1...3 {
            let database = try Database.inMemory()
            #expect(try migrator.migrate(database, upTo: target) == Array(1...target))
            #expect(try database.read { db in try migrator.currentVersion(db) } == target)
            #expect(try migrator.migrate(database) == Array((target + 1)..<4))
        }
    }

    @Test func tamperedChecksumIsRefusedAndNothingChanges() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let v1 = Migration(version: 1, name: "a", sql: "CREATE TABLE a (x);")
        let v2 = Migration(version: 2, name: "b", sql: "CREATE TABLE b (x);")
        try Migrator(migrations: [v1]).migrate(try Database(path: path))
        let before = try dump(path)
        let edited = Migrator(migrations: [Migration(version: 1, name: "a", sql: "CREATE TABLE a (x, y);"), v2])
        let error = try #require(throws: StorageError.self) { try edited.migrate(try Database(path: path)) }
        guard case .migrationChanged(let version, _, let recorded, let file) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(version == 1)
        #expect(recorded == v1.checksum)
        #expect(file != v1.checksum)
        #expect(try dump(path) == before)
    }

    @Test func unknownNewerMigrationIsRefusedWithTheFileUnchanged() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let v1 = Migration(version: 1, name: "a", sql: "CREATE TABLE a (x);")
        let v2 = Migration(version: 2, name: "b", sql: "CREATE TABLE b (x);")
        do {
            let database = try Database(path: path)
            try Migrator(migrations: [v1, v2]).migrate(database)
            database.close()
        }
        let before = try #require(fileBytes(path))
        let error = try #require(throws: StorageError.self) {
            let database = try Database(path: path)
            defer { database.close() }
            try Migrator(migrations: [v1]).migrate(database)
        }
        #expect(error == .unknownMigration(version: 2, name: "b", binaryVersion: 1))
        #expect(error.description.contains("2") && error.description.contains("up to 1"))
        #expect(fileBytes(path) == before)
    }

    @Test func newerUserVersionAloneIsRefused() throws {
        let database = try Database.inMemory()
        try database.writeWithoutTransaction { db in try db.execute("PRAGMA user_version = 99") }
        let error = try #require(throws: StorageError.self) { try Migrator.embedded.migrate(database) }
        #expect(error == .schemaNewer(databaseVersion: 99, binaryVersion: Migrator.embedded.latestVersion))
    }

    @Test func failingMigrationRollsBackEntirely() throws {
        let database = try Database.inMemory()
        let broken = Migrator(migrations: [
            Migration(version: 1, name: "ok", sql: "CREATE TABLE a (x);"),
            Migration(version: 2, name: "broken", sql: "CREATE TABLE b (x); INSERT INTO nowhere VALUES (1);"),
        ])
        #expect(throws: SQLiteError.self) { try broken.migrate(database) }
        let (version, tables) = try database.read { db throws in
            (try broken.currentVersion(db), try db.fetchInt64("SELECT count(*) FROM sqlite_schema WHERE name = 'b'"))
        }
        #expect(version == 1)
        #expect(tables == 0)
    }

    @Test func embeddedMigrationTextEqualsTheFiles() throws {
        let folder = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Migrations/sqlite")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".sql") }.sorted()
        #expect(!names.isEmpty)
        #expect(EmbeddedMigrationFile.all.map(\.fileName) == names)
        for file in EmbeddedMigrationFile.all {
            let bytes = try Data(contentsOf: folder.appendingPathComponent(file.fileName))
            #expect(Data(file.bytes) == bytes, "embedded \(file.fileName) differs from the file")
        }
    }

    @Test func checksumIsSHA256OfTheFileBytes() {
        #expect(SHA256.hexDigest(of: Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hexDigest(of: []) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        let long = Array(String(repeating: "a", count: 1000).utf8)
        #expect(SHA256.hexDigest(of: long) == "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3")
    }

    @Test func storeOpeningANewerDatabaseIsRefused() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        _ = try FeedStore(path: path)
        let future = Migrator(
            migrations: Migrator.embedded.migrations + [Migration(version: 9999, name: "future", sql: "CREATE TABLE future (x);")])
        _ = try FeedStore(path: path, migrator: future)
        let error = try #require(throws: StorageError.self) { try FeedStore(path: path) }
        #expect(error == .unknownMigration(version: 9999, name: "future", binaryVersion: Migrator.embedded.latestVersion))
    }

    // MARK: - Opening without writing

    /// Rewrites the database at `path` to rollback-journal mode, applying `sql` on the way.
    private func switchToRollbackJournal(_ path: String, then sql: String = "") throws {
        let connection = try Connection(location: .file(path))
        try connection.execute("PRAGMA journal_mode = DELETE;" + sql)
        connection.close()
    }

    /// Bytes 18 and 19 of the header: 1 for a rollback journal, 2 for WAL.
    private func fileFormatVersions(_ path: String) -> [UInt8] {
        Array((fileBytes(path) ?? Data())[18..<20])
    }

    private func expectNoSideFiles(_ path: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for suffix in ["-wal", "-shm", "-journal"] {
            #expect(!FileManager.default.fileExists(atPath: path + suffix), "\(suffix) exists", sourceLocation: sourceLocation)
        }
    }

    @Test(arguments: [FeedStore.OpenMode.migrate, .readCurrent, .inspect])
    func newerSchemaInARollbackJournalFileIsRefusedBeforeAnythingWrites(_ mode: FeedStore.OpenMode) throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        FeedStore.closing(try FeedStore(path: path))
        try switchToRollbackJournal(path, then: "PRAGMA user_version = 99;")
        let before = try #require(fileBytes(path))
        #expect(fileFormatVersions(path) == [1, 1])
        let error = try #require(throws: StorageError.self) { try FeedStore(path: path, mode: mode) }
        #expect(error == .schemaNewer(databaseVersion: 99, binaryVersion: Migrator.embedded.latestVersion))
        #expect(fileBytes(path) == before)
        #expect(fileFormatVersions(path) == [1, 1])
        expectNoSideFiles(path)
    }

    @Test func unknownNewerMigrationInARollbackJournalFileIsRefusedBeforeAnythingWrites() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let future = Migrator(
            migrations: Migrator.embedded.migrations + [Migration(version: 9999, name: "future", sql: "CREATE TABLE future (x);")])
        FeedStore.closing(try FeedStore(path: path, migrator: future))
        try switchToRollbackJournal(path)
        let before = try #require(fileBytes(path))
        let error = try #require(throws: StorageError.self) { try FeedStore(path: path) }
        #expect(error == .unknownMigration(version: 9999, name: "future", binaryVersion: Migrator.embedded.latestVersion))
        #expect(fileBytes(path) == before)
        #expect(fileFormatVersions(path) == [1, 1])
        expectNoSideFiles(path)
    }

    @Test func inspectingAnOlderDatabaseReportsItsPendingMigrationsAndChangesNothing() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let v1 = Migration(version: 1, name: "a", sql: "CREATE TABLE a (x); INSERT INTO a VALUES (1);")
        let v2 = Migration(version: 2, name: "b", sql: "CREATE TABLE b (x);")
        let older = Migrator(migrations: [v1])
        let newer = Migrator(migrations: [v1, v2])
        FeedStore.closing(try FeedStore(path: path, migrator: older))
        let before = try #require(fileBytes(path))
        expectNoSideFiles(path)
        var tidy = Configuration()
        tidy.removesWALFilesOnClose = true

        let inspected = try FeedStore(path: path, mode: .inspect, configuration: tidy, migrator: newer)
        #expect(try inspected.schemaVersion() == (database: 1, binary: 2))
        #expect(try inspected.pendingMigrations().map(\.version) == [2])
        #expect(try inspected.read { db in try db.fetchInt64("SELECT count(*) FROM a") } == 1)
        #expect(throws: StorageError.readOnly(path: path)) { try inspected.write { db in try db.execute("CREATE TABLE c (x)") } }
        inspected.close()
        #expect(fileBytes(path) == before)
        expectNoSideFiles(path)

        let error = try #require(throws: StorageError.self) {
            try FeedStore(path: path, mode: .readCurrent, configuration: tidy, migrator: newer)
        }
        #expect(error == .migrationsPending(databaseVersion: 1, binaryVersion: 2))
        #expect(fileBytes(path) == before)
        expectNoSideFiles(path)

        // Opening to migrate does migrate.
        let migrated = try FeedStore(path: path, migrator: newer)
        #expect(try migrated.pendingMigrations().isEmpty)
        #expect(try migrated.schemaVersion() == (database: 2, binary: 2))
        migrated.close()
    }

    @Test func readOnlyModesNeverCreateAFile() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("none.sqlite")
        for mode in [FeedStore.OpenMode.readCurrent, .inspect] {
            let error = try #require(throws: StorageError.self) { try FeedStore(path: path, mode: mode) }
            guard case .cannotOpen = error else {
                Issue.record("unexpected \(error)")
                continue
            }
            #expect(!FileManager.default.fileExists(atPath: path))
        }
    }

    private func dump(_ path: String) throws -> [String] {
        let connection = try Connection(location: .file(path), readOnly: true)
        var lines = try connection.fetchAll("SELECT type || ' ' || name || ' ' || coalesce(sql, '') FROM sqlite_schema ORDER BY name") {
            $0.string(at: 0)
        }
        if try connection.fetchInt64("SELECT count(*) FROM sqlite_schema WHERE name = 'schema_migrations'") == 1 {
            lines += try connection.fetchAll("SELECT version || name || checksum || applied_at FROM schema_migrations") { $0.string(at: 0) }
        }
        lines.append("user_version \(try connection.fetchInt64("PRAGMA user_version") ?? -1)")
        return lines
    }
}

extension FeedStore {
    /// Closes `store` (so the last connection checkpoints the WAL and removes its files).
    static func closing(_ store: FeedStore) {
        store.close()
    }
}
