import FeedSync
import FeedSQLite
import FeedSQLiteBackend
import FeedMigrations
import FeedTestSupport
import Foundation
import Synchronization
import FeedTestThreads
import Testing

@testable import FeedCLI

/// Exit statuses for a database that is missing, not a database, newer, older or locked, and for usage errors.
extension EndToEndTests {
    // MARK: - Exit statuses for the database

    @Test func missingDatabaseIs74() throws {
        expectFailure(
            try feedsync("feed"), status: 74,
            message: "Error: no database at \"\(database)\". Run 'feedsync init' to create it, or pass --db.")
        #expect(!FileManager.default.fileExists(atPath: database))
    }

    @Test func notADatabaseIs74AndLeftUntouched() throws {
        let bytes = Data(String(repeating: "not sqlite at all ", count: 300).utf8)
        try #require(FileManager.default.createFile(atPath: database, contents: bytes))
        let result = try feedsync("status")
        #expect(result.status == 74)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.hasPrefix("Error: \"\(database)\" is not a FeedSync database"))
        #expect(fileBytes(database) == bytes)
    }

    @Test func unwritableLocationIs74() throws {
        let result = try CLIRun.run(["init"], environment: environment(["FEEDSYNC_DB": "/proc/feedsync/x.sqlite"]))
        #expect(result.status == 74)
        #expect(result.stderr.hasPrefix("Error: cannot "))
        #expect(result.stderr.split(separator: "\n").count == 1)
    }

    @Test func newerSchemaIs74() throws {
        try feedsync("init")
        try #require(try SpawnedProcess.run("/usr/bin/sqlite3", [database, "PRAGMA user_version = 99;"]).status == 0)
        let result = try feedsync("feed")
        #expect(result.status == 74)
        #expect(result.stderr.contains("newer than this feedsync"))
        #expect(result.stderr.hasSuffix("Upgrade feedsync.\n"))
    }

    /// The files in the database's directory, for "nothing else was created" checks.
    private func directoryListing() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: home.path).sorted()
    }

    /// Bytes 18 and 19 of the database header: 1 for a rollback journal, 2 for WAL.
    private func fileFormatVersions() -> [UInt8] {
        Array((fileBytes(database) ?? Data())[18..<20])
    }

    @Test func statusOnAnOlderSchemaReportsItsPendingMigrationsWithoutMigrating() throws {
        // A database at an older schema: this binary's migrations but the last, plus a row of someone's own table
        // so that the file has content whatever the number of migrations.
        let older = Migrator(migrations: Array(Migrator.embedded.migrations.dropLast()))
        let store = try FeedStore(path: database, migrator: older)
        try store.write { db in try db.execute("CREATE TABLE notes (x); INSERT INTO notes VALUES (1);") }
        store.close()
        let before = try #require(fileBytes(database))
        let listing = try directoryListing()

        let report = try feedsync("status", "--json")
        #expect(report.status == 0, "\(report.stderr)")
        let status = try json(report.stdout)
        #expect(status["schemaVersion"] as? Int == older.latestVersion)
        #expect(status["binarySchemaVersion"] as? Int == Migrator.embedded.latestVersion)
        #expect(status["pendingMigrations"] as? Int == 1)
        #expect(status["users"] is NSNull)
        #expect(status["lastSeq"] is NSNull)
        let last = try #require(Migrator.embedded.migrations.last)
        #expect(
            report.stderr
                == "The database needs migration \(last.version) (\(last.name)): run 'feedsync init' to apply it; "
                + "commands that only read refuse the database until then.\n")
        let text = try feedsync("status")
        #expect(text.stdout.contains("pending migrations  1\n"))
        #expect(text.stdout.contains("users               -\n"))
        #expect(fileBytes(database) == before)
        #expect(try directoryListing() == listing)

        // Commands that only read refuse it, naming the fix, and change nothing either.
        let refusal =
            "Error: the database \"\(database)\" has schema version \(older.latestVersion) and this feedsync reads version "
            + "\(Migrator.embedded.latestVersion); reading never migrates. Run 'feedsync init' to migrate it."
        for command in [["feed"], ["show", "post1"], ["events"], ["user", "list"]] {
            expectFailure(try CLIRun.run(command, environment: environment()), status: 74, message: refusal)
        }
        #expect(fileBytes(database) == before)
        #expect(try directoryListing() == listing)

        // A command that writes migrates, as before.
        #expect(try feedsync("init").status == 0)
        #expect(try json(try feedsync("status", "--json").stdout)["pendingMigrations"] as? Int == 0)
    }

    @Test func newerSchemaInARollbackJournalFileIsRefusedBeforeAnythingWrites() throws {
        try demoDatabase()
        let connection = try Connection(location: .file(database))
        try connection.execute("PRAGMA journal_mode = DELETE; PRAGMA user_version = 99;")
        connection.close()
        let before = try #require(fileBytes(database))
        #expect(fileFormatVersions() == [1, 1])
        let listing = try directoryListing()
        let message =
            "Error: the database's schema version 99 is newer than this feedsync (up to \(Migrator.embedded.latestVersion)). "
            + "Upgrade feedsync."
        for command in [["status"], ["feed"], ["like", "post1", "--user", "bob"], ["init"], ["check"], ["events", "--follow"]] {
            expectFailure(try CLIRun.run(command, environment: environment()), status: 74, message: message)
            #expect(fileBytes(database) == before, "\(command) changed the file")
            #expect(fileFormatVersions() == [1, 1], "\(command) switched the journal mode")
            #expect(try directoryListing() == listing, "\(command) created a file")
        }
    }

    @Test func lockedBeyondTheTimeoutIs75() throws {
        try demoDatabase()
        let holder = try SpawnedProcess(
            executable: "/usr/bin/sqlite3", arguments: [database], input: .pipe, error: .inherit)
        defer {
            holder.closeInput()
            holder.waitUntilExit()
        }
        holder.write("BEGIN IMMEDIATE; INSERT INTO users (id, name, created_at) VALUES ('lock', '', 0); SELECT 'locked';\n")
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("locked") {
            let chunk = readSome(holder.standardOutput!)
            try #require(!chunk.isEmpty)
            seen += chunk
        }
        let result = try feedsync("like", "post1", "--user", "bob", env: ["FEEDSYNC_BUSY_TIMEOUT_MS": "200"])
        #expect(result.status == 75)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr == "Error: the database stayed locked by another process beyond the busy timeout. Try again.\n")
    }

    @Test func usageErrorsAre64WithOneLine() throws {
        expectFailure(
            try feedsync("fed"), status: 64, message: "Error: unknown command \"fed\" (did you mean 'feed'?). See 'feedsync --help'.")
        expectFailure(
            try feedsync("feed", "--limit", "0"), status: 64,
            message: "Error: invalid value \"0\" for --limit: use a whole number from 1 to 1000. See 'feedsync feed --help'.")
        expectFailure(
            try feedsync("feed", "--nope"), status: 64, message: "Error: unknown option \"--nope\" for 'feed'. See 'feedsync feed --help'.")
        expectFailure(try feedsync(), status: 64, message: "Error: no command given. See 'feedsync --help'.")
    }

    // MARK: - Environment

    /// `FEEDSYNC_LOG=info` prints the service's log events on stderr, one `feedsync: [level] kind: …` line each (a
    /// command's service logs `service.closed` as it ends); unset, stderr stays empty.
    @Test func feedsyncLogPrintsTheServicesLogEventsOnStderr() throws {
        try demoDatabase()
        let quiet = try feedsync("status")
        #expect(quiet.status == 0 && quiet.stderr.isEmpty, "\(quiet.stderr)")
        let logged = try feedsync("--user", "bob", "like", "post1", env: ["FEEDSYNC_LOG": "info"])
        #expect(logged.status == 0, "\(logged.stderr)")
        let lines = logged.stderr.split(separator: "\n")
        #expect(lines.contains { $0.hasPrefix("feedsync: [info] service.closed: ") }, "\(logged.stderr)")
        #expect(lines.allSatisfy { $0.hasPrefix("feedsync: [") }, "\(logged.stderr)")
        let warningsOnly = try feedsync("status", env: ["FEEDSYNC_LOG": "WARNING"])
        #expect(warningsOnly.status == 0 && warningsOnly.stderr.isEmpty, "\(warningsOnly.stderr)")
    }

    /// Every variable of Docs/CLI.md's environment table is read at start-up (``ProcessEnvironment/names``, looked up
    /// one by one), except `FEEDSYNC_LIBPQ`, which the libpq loader reads itself.
    @Test func everyDocumentedVariableIsReadAtStartUp() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Docs/CLI.md"), encoding: .utf8)
        let table = text.components(separatedBy: "| variable | meaning |")[1].components(separatedBy: "\n\n")[0]
        let documented = table.split(separator: "\n").compactMap { $0.hasPrefix("| `") ? $0.split(separator: "|").first : nil }
            .flatMap { $0.split(separator: ",").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "` ")) } }
        #expect(documented.count >= 10, "\(documented)")
        let unread = Set(documented).subtracting(ProcessEnvironment.names).subtracting(["FEEDSYNC_LIBPQ"])
        #expect(unread.isEmpty, "documented but never read: \(unread.sorted())")
    }
}
