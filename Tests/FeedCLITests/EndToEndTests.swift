import FeedSync
import FeedSQLite
import FeedSQLiteBackend
import FeedMigrations
import FeedTestSupport
import Foundation
import Synchronization
import FeedTestThreads
import Testing

/// Runs the built `feedsync` binary as a subprocess on temporary databases.
@Suite(.ownThreads) struct EndToEndTests {
    let home = TemporaryDirectory("feedsync-cli")
    /// The database the test runs on: a file in `home`, or a PostgreSQL URL after ``use(_:)``.
    var database: String { chosen.value.withLock { $0 } ?? home.file("feed.sqlite") }
    /// The database as `feedsync` prints it (a URL without its password).
    var shownDatabase: String { FeedLocation.redacted(database) }
    private let chosen = ChosenDatabase()

    /// Points the test at a fresh database on `backend`; `false` when that backend's test server is not configured.
    func use(_ backend: TestBackend) throws -> Bool {
        guard let location = try backend.makeLocation(in: home) else { return false }
        chosen.value.withLock { $0 = location }
        return true
    }

    func environment(_ extra: [String: String] = [:]) -> [String: String] {
        CLIRun.environment(home: home.path, ["FEEDSYNC_DB": database].merging(extra) { $1 })
    }

    @discardableResult
    func feedsync(_ arguments: String..., stdin: String = "", env: [String: String] = [:]) throws -> CLIResult {
        try CLIRun.run(arguments, environment: environment(env), stdin: stdin)
    }

    /// A database with the demo data (alice likes post2).
    func demoDatabase() throws {
        let result = try feedsync("demo")
        try #require(result.status == 0, "\(result.stderr)")
    }

    func json(_ text: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    func expectFailure(_ result: CLIResult, status: Int32, message: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == status, sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
        #expect(result.stderr == message + "\n", sourceLocation: sourceLocation)
    }

    // MARK: - Commands

    @Test func initCreatesAnOwnerOnlyFileAndIsHarmlessTwice() throws {
        let first = try feedsync("init")
        #expect(first.status == 0)
        let version = Migrator.embedded.latestVersion
        #expect(first.stdout == "Created database: \(database) (schema version \(version))\n")
        let attributes = try FileManager.default.attributesOfItem(atPath: database)
        #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o077 } == 0)
        let second = try feedsync("init", "--json")
        #expect(second.stdout == #"{"path":"\#(database)","schemaVersion":\#(version),"created":false}"# + "\n")
    }

    /// Ten `feedsync init` processes started at once on one new database: every one succeeds, and each migration
    /// was applied exactly once (one `schema_migrations` row per version; a second apply would have failed).
    @Test(arguments: TestBackend.allCases) func tenProcessesStartingAtOnceMigrateExactlyOnce(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        let results = LockedResults()
        let done = DispatchGroup()
        let environment = environment()
        for _ in 0..<10 {
            done.enter()
            Thread {
                defer { done.leave() }
                results.append(Result { try CLIRun.run(["init", "--json"], environment: environment) })
            }.start()
        }
        try #require(done.wait(timeout: .now() + 120) == .success, "ten `feedsync init` processes did not finish in 120 s")
        let outcomes = try results.all.map { try $0.get() }
        #expect(outcomes.count == 10)
        for outcome in outcomes { #expect(outcome.status == 0, "\(outcome.stderr)") }
        let service = try FeedService(location: database)
        defer { service.close() }
        let status = try service.status()
        #expect(status.schemaVersion == status.binarySchemaVersion && status.pendingMigrations == 0)
        let rows = try service.backend.read { tx in
            try tx.fetch("SELECT version, count(*) FROM schema_migrations GROUP BY version ORDER BY version", [])
        }
        #expect(rows.map { $0[0].integer } == (1...status.binarySchemaVersion).map { Int64($0) })
        #expect(rows.allSatisfy { $0[1].integer == 1 })
    }

    /// A URL of another scheme is refused before anything is opened or created — otherwise it would be taken for a
    /// relative path (a `mysql:` directory in the working directory) — and its password is not echoed.
    @Test func aURLOfAnotherSchemeIs64AndCreatesNothing() throws {
        let work = TemporaryDirectory("feedsync-cwd")
        for url in ["mysql://root:hunter2@db/feed", "http://example.com/feed.sqlite", "sqlite://x.sqlite"] {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: CLIRun.executable)
            process.arguments = ["init", "--db", url]
            process.environment = environment()
            process.currentDirectoryURL = URL(fileURLWithPath: work.path)
            let errors = Pipe()
            process.standardError = errors
            process.standardOutput = Pipe()
            try launch(process)
            let stderr = String(decoding: readAll(errors.fileHandleForReading), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 64, "\(url)")
            #expect(stderr.hasPrefix("Error: --db \"") && stderr.contains("is a URL FeedSync cannot open"), "\(stderr)")
            #expect(!stderr.contains("hunter2"))
            #expect(stderr.split(separator: "\n").count == 1)
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.path).isEmpty)
        let fromEnvironment = try feedsync("status", env: ["FEEDSYNC_DB": "mysql://root:hunter2@db/feed"])
        #expect(fromEnvironment.status == 64)
        #expect(fromEnvironment.stderr.hasPrefix("Error: FEEDSYNC_DB \"mysql://root@db/feed\" is a URL FeedSync cannot open"))
    }

    /// A PostgreSQL URL's password never appears in what `feedsync` prints: not in `status`, not in `init`, not in an
    /// error about the server.
    @Test func aPostgreSQLPasswordIsNeverPrinted() throws {
        guard try use(.postgresql) else { return }
        let password = try #require(URLComponents(string: database)?.password, "the test server's URL has a password")
        var outputs = [try feedsync("init"), try feedsync("status"), try feedsync("status", "--json"), try feedsync("demo")]
        // A database that does not exist, and a server that does not listen: one-line errors, exit 75.
        var missing = try #require(URLComponents(string: database))
        missing.path = "/fs_no_such_database"
        let noDatabase = try feedsync("status", "--db", missing.string ?? "")
        #expect(noDatabase.status == 75)
        missing.port = 1
        let noServer = try feedsync("status", "--db", missing.string ?? "")
        #expect(noServer.status == 75)
        outputs += [noDatabase, noServer]
        for output in outputs {
            #expect(!output.stdout.contains(password) && !output.stderr.contains(password))
        }
        for failure in [noDatabase, noServer] {
            #expect(failure.stderr.split(separator: "\n").count == 1 && failure.stderr.hasPrefix("Error: no connection to"))
        }
        #expect(try feedsync("status").stdout.contains("backend             PostgreSQL"))
        #expect(try json(try feedsync("status", "--json").stdout)["path"] as? String == shownDatabase)
    }

    @Test func defaultDatabaseGoesUnderHomeWithMissingDirectoriesCreated() throws {
        let result = try CLIRun.run(["init"], environment: CLIRun.environment(home: home.path))
        #expect(result.status == 0)
        #expect(FileManager.default.fileExists(atPath: home.path + "/.local/share/feedsync/feedsync.sqlite"))
        let xdg = try CLIRun.run(["init", "--json"], environment: CLIRun.environment(home: home.path, ["XDG_DATA_HOME": home.file("xdg")]))
        #expect(xdg.stdout.contains(home.file("xdg") + "/feedsync/feedsync.sqlite"))
    }

    @Test func demoEndsOnTheFeedWithAHeartOnPost2AndIsRerunnable() throws {
        for run in 1...2 {
            let result = try CLIRun.run(["demo"], environment: CLIRun.environment(home: home.path))
            #expect(result.status == 0, "run \(run): \(result.stderr)")
            let lines = result.lines
            let lastFeed = try #require(lines.lastIndex { $0.hasPrefix("POST") })
            let post2 = try #require(lines[lastFeed...].first { $0.hasPrefix("post2") })
            #expect(post2.hasSuffix("❤️"))
            #expect(post2.contains("  1  "))
            #expect(lines[lastFeed...].filter { $0.contains("❤️") }.count == 1)
        }
    }

    @Test(arguments: TestBackend.allCases) func demoRefusesADatabaseWithOtherPosts(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try #require(try feedsync("seed", "--posts", "10", "--users", "5", "--likes", "3").status == 0)
        expectFailure(
            try feedsync("demo"), status: 65,
            message:
                "Error: the database \"\(shownDatabase)\" has other posts than the demo's (no alice or post2). Pass --db with a new path.")
    }

    @Test(arguments: TestBackend.allCases) func usersAndPosts(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try feedsync("init")
        #expect(try feedsync("user", "add", "alice", "--name", "Alice").stdout == "alice\n")
        let user = try json(try feedsync("user", "add", "bob", "--json").stdout)
        #expect(user["id"] as? String == "bob")
        #expect(user["name"] as? String == "")
        #expect(try feedsync("user", "list").lines.count == 3)
        let list = try json(try feedsync("user", "list", "--json").stdout)
        #expect((list["users"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["alice", "bob"])
        #expect(try feedsync("post", "add", "--author", "alice", "--id", "p1", "Hello").stdout == "p1\n")
        #expect(try feedsync("post", "add", "--author", "bob", "--id", "p2", "--", "-dashes first").stdout == "p2\n")
        let generated = try feedsync("post", "add", "--author", "bob", "no id").stdout
        #expect(generated.hasPrefix("post-"))
        expectFailure(
            try feedsync("post", "add", "--author", "zed", "x"), status: 65,
            message: "Error: no user \"zed\". See 'feedsync user list', or create it with 'feedsync user add ID'.")
        expectFailure(
            try feedsync("post", "add", "--author", "bob", "--id", "p1", "again"), status: 65,
            message: "Error: post \"p1\" exists already. Choose another --id, or leave it out to generate one.")
        expectFailure(
            try feedsync("user", "add", "bad id"), status: 65,
            message: "Error: invalid user id \"bad id\": use only letters, digits and _ . : @ -.")
        expectFailure(
            try feedsync("user", "add", "alice"), status: 65,
            message: "Error: user \"alice\" exists already. See 'feedsync user list'.")
    }

    @Test(arguments: TestBackend.allCases) func feedJSONHasTheDocumentedShapeAndTypes(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let result = try feedsync("feed", "--json", "--user", "alice", "--limit", "2")
        #expect(result.status == 0)
        #expect(result.stderr.isEmpty)
        let page = try json(result.stdout)
        #expect(page["viewer"] as? String == "alice")
        let posts = try #require(page["posts"] as? [[String: Any]])
        #expect(posts.map { $0["id"] as? String } == ["post5", "post4"])
        let first = try #require(posts.first)
        #expect(Set(first.keys) == ["id", "author", "body", "createdAt", "likeCount", "liked"])
        #expect(first["likeCount"] is Int)
        #expect(result.stdout.contains(#""likeCount":0,"liked":false}"#))  // an integer and a JSON boolean
        #expect((first["createdAt"] as? String)?.hasSuffix("Z") == true)
        let cursor = try #require(page["nextCursor"] as? String)
        // Key order is the documented one.
        #expect(result.stdout.hasPrefix(#"{"viewer":"alice","posts":[{"id":"post5","author":"bob","body":"#))
        let next = try json(try feedsync("feed", "--json", "--user", "alice", "--before", cursor, "--limit", "10").stdout)
        let rest = try #require(next["posts"] as? [[String: Any]])
        #expect(rest.map { $0["id"] as? String } == ["post3", "post2", "post1"])
        #expect(rest[1]["liked"] as? Bool == true)
        #expect(next["nextCursor"] is NSNull)
    }

    @Test(arguments: TestBackend.allCases) func textFeedHasHeartsOnlyOnLikedLinesAndNoEscapes(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        try feedsync("post", "add", "--author", "bob", "--id", "evil", "hi \u{1B}[2J\u{1B}]0;pwned\u{7} there\nline two")
        let result = try feedsync("feed", "--user", "alice")
        #expect(result.status == 0)
        #expect(!result.stdout.contains("\u{1B}"))
        #expect(!result.stdout.contains("\u{7}"))
        let lines = result.lines
        #expect(lines.first == "POST   AUTHOR  LIKES  TEXT")
        #expect(lines.filter { $0.contains("❤️") }.map { String($0.prefix(5)) } == ["post2"])
        #expect(lines.count == 7)
        // Anonymous feed: nothing liked.
        #expect(!(try feedsync("feed").stdout.contains("❤️")))
    }

    @Test(arguments: TestBackend.allCases) func showPrintsTheBarePostObject(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let post = try json(try feedsync("show", "post2", "--json", "--user", "alice").stdout)
        #expect(post["id"] as? String == "post2")
        #expect(post["author"] as? String == "bob")
        #expect(post["liked"] as? Bool == true)
        #expect(post["likeCount"] as? Int == 1)
        let text = try feedsync("show", "post2", "--user", "alice")
        #expect(text.stdout.contains("1 like ❤️ (you like it)"))
        expectFailure(try feedsync("show", "post9"), status: 65, message: "Error: no post \"post9\". See 'feedsync feed' for ids.")
    }

    @Test(arguments: TestBackend.allCases) func likeUnlikeToggleReportWhatChanged(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let liked = try feedsync("like", "post1", "--user", "bob", "--json")
        #expect(liked.status == 0)
        #expect(liked.stdout.hasPrefix(#"{"postID":"post1","userID":"bob","liked":true,"likeCount":1,"changed":true,"seq":"#))
        let again = try feedsync("like", "post1", "--json", env: ["FEEDSYNC_USER": "bob"])
        #expect(again.stdout == #"{"postID":"post1","userID":"bob","liked":true,"likeCount":1,"changed":false,"seq":null}"# + "\n")
        let unliked = try json(try feedsync("unlike", "post1", "--user", "bob", "--json").stdout)
        #expect(unliked["liked"] as? Bool == false)
        #expect(unliked["likeCount"] as? Int == 0)
        #expect(unliked["seq"] is Int)
        let toggled = try json(try feedsync("toggle", "post1", "--user", "bob", "--json").stdout)
        #expect(toggled["liked"] as? Bool == true)
        #expect(try feedsync("unlike", "post3", "--user", "bob").stdout == "post3 was not liked by bob (0 likes); nothing changed.\n")
        expectFailure(
            try feedsync("like", "post9", "--user", "bob"), status: 65, message: "Error: no post \"post9\". See 'feedsync feed' for ids.")
        expectFailure(
            try feedsync("like", "post1", "--user", "zed"), status: 65,
            message: "Error: no user \"zed\". See 'feedsync user list', or create it with 'feedsync user add ID'.")
        expectFailure(
            try feedsync("like", "post1"), status: 64,
            message: "Error: 'like' acts as a user: pass --user ID or set FEEDSYNC_USER. See 'feedsync like --help'.")
    }

    @Test(arguments: TestBackend.allCases) func eventsPrintsTheLogAsJSONLines(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let all = try feedsync("events", "--json")
        let lines = all.lines
        #expect(lines.count == 9)  // 3 users, 5 posts, 1 like
        let last = try json(try #require(lines.last))
        #expect(last["seq"] as? Int == 9)
        #expect(last["kind"] as? String == "liked")
        #expect(last["postID"] as? String == "post2")
        #expect(last["userID"] as? String == "alice")
        #expect(last["likeCount"] as? Int == 1)
        #expect(lines.last?.hasPrefix(#"{"seq":9,"kind":"liked","postID":"post2","userID":"alice","likeCount":1,"at":""#) == true)
        let since = try feedsync("events", "--json", "--since", "7", "--limit", "1").lines
        #expect(since.count == 1)
        #expect(since.first?.hasPrefix(#"{"seq":8,"#) == true)
        #expect(try feedsync("events", "--since", "0").lines.count == 10)  // header + 9
    }

    @Test(arguments: TestBackend.allCases) func eventsSinceAPrunedSeqFailsWithStatus66(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let service = try FeedService(location: database)
        #expect(try service.pruneEvents(through: 4) == 4)
        service.close()
        let message =
            "Error: the events after seq 2 are no longer in the log (pruned through 4). Pass --since 4 or later, or leave --since out, to print what the log holds."
        expectFailure(try feedsync("events", "--since", "2"), status: 66, message: message)
        expectFailure(try feedsync("events", "--follow", "--since", "2"), status: 66, message: message)
        // From the pruning mark on, and without --since, the log as it is.
        #expect(try feedsync("events", "--json", "--since", "4").lines.count == 5)
        #expect(try feedsync("events", "--json").lines.count == 5)
    }

    @Test(arguments: TestBackend.allCases) func statusAndCheck(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let status = try json(try feedsync("status", "--json").stdout)
        #expect(status["schemaVersion"] as? Int == status["binarySchemaVersion"] as? Int)
        #expect(status["pendingMigrations"] as? Int == 0)
        #expect(status["posts"] as? Int == 5)
        #expect(status["likes"] as? Int == 1)
        #expect(status["lastSeq"] as? Int == 9)
        #expect(try feedsync("status").stdout.contains("last seq            9"))
        let check = try feedsync("check")
        #expect(check.status == 0)
        #expect(try feedsync("check", "--json").stdout == #"{"ok":true,"violations":[]}"# + "\n")
    }

    @Test func checkExitsOneListingEachViolation() throws {
        try demoDatabase()
        // Break the like-count invariant behind FeedSync's back (triggers dropped first).
        let sql = "UPDATE posts SET like_count = 7 WHERE id = 'post3';"
        let sqlite = Process()
        sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        sqlite.arguments = [database, sql]
        try launch(sqlite)
        sqlite.waitUntilExit()
        try #require(sqlite.terminationStatus == 0)
        let result = try feedsync("check")
        #expect(result.status == 1)
        #expect(result.stdout.contains("like-count: post \"post3\" has like_count 7 but 0 like rows"))
        let report = try json(try feedsync("check", "--json").stdout)
        #expect(report["ok"] as? Bool == false)
    }

    @Test(arguments: TestBackend.allCases) func seedIsDeterministicAndRefusesADatabaseWithPosts(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        let result = try feedsync("seed", "--posts", "200", "--users", "50", "--likes", "1000")
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.isEmpty)  // no progress bar into a pipe
        let status = try json(try feedsync("status", "--json").stdout)
        #expect(status["posts"] as? Int == 200)
        #expect(status["likes"] as? Int == 1000)
        #expect(try feedsync("check").status == 0)
        let other = home.file("other.sqlite")
        _ = try CLIRun.run(
            ["seed", "--posts", "200", "--users", "50", "--likes", "1000"], environment: environment(["FEEDSYNC_DB": other]))
        let first = try feedsync("feed", "--json", "--user", "user7", "--limit", "50").stdout
        let second = try CLIRun.run(
            ["feed", "--json", "--user", "user7", "--limit", "50"], environment: environment(["FEEDSYNC_DB": other])
        ).stdout
        #expect(first == second)
        expectFailure(
            try feedsync("seed"), status: 65,
            message:
                "Error: the database \"\(shownDatabase)\" already has 200 posts; seed fills only an empty one. Pass --db with a new path.")
    }

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
        let sqlite = Process()
        sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        sqlite.arguments = [database, "PRAGMA user_version = 99;"]
        try launch(sqlite)
        sqlite.waitUntilExit()
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
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        holder.arguments = [database]
        let input = Pipe(), output = Pipe()
        holder.standardInput = input
        holder.standardOutput = output
        try launch(holder)
        defer {
            try? input.fileHandleForWriting.close()
            holder.waitUntilExit()
        }
        input.fileHandleForWriting.write(
            Data("BEGIN IMMEDIATE; INSERT INTO users (id, name, created_at) VALUES ('lock', '', 0); SELECT 'locked';\n".utf8))
        var seen = Data()
        while !String(decoding: seen, as: UTF8.self).contains("locked") {
            let chunk = readSome(output.fileHandleForReading)
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

    // MARK: - Help and version

    @Test func helpForACommandIsGeneratedFromItsMetadata() throws {
        let result = try feedsync("show", "--help")
        #expect(result.status == 0)
        #expect(
            result.stdout == """
                Show one post: text, author, time, likes, and whether the viewer likes it.

                Usage: feedsync show POST

                Arguments:
                  POST  The post's id.

                Global options: --db PATH, --user ID, --json, --no-color, -h/--help, --version (see 'feedsync --help').

                """)
        #expect(try feedsync("-h", "like").stdout.contains("Acts as --user ID (or $FEEDSYNC_USER), which is required."))
        #expect(
            try feedsync("help", "user").stdout == """
                Usage: feedsync user <command> [options]

                Commands:
                  user add   Create a user.
                  user list  List the users, ordered by id.

                See 'feedsync user <command> --help' for details.

                """)
    }

    @Test func topLevelHelpListsEveryCommand() throws {
        let result = try feedsync("--help")
        #expect(result.status == 0)
        #expect(result.stdout == HelpSnapshots.overview)
        #expect(try feedsync("--version").stdout == "feedsync \(FeedSyncCLIVersion.expected)\n")
    }

    // MARK: - Interactive and streaming

    @Test(arguments: TestBackend.allCases) func appDrivenThroughPipedInputShowsTheHeartAfterBack(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let result = try feedsync("app", "--user", "alice", stdin: "open post3\nlike\nback\nquit\n")
        #expect(result.status == 0, "\(result.stderr)")
        let screens = result.stdout.components(separatedBy: "\n\n")
        let afterBack = try #require(screens.last { $0.hasPrefix("Feed for alice") })
        let post3 = try #require(afterBack.split(separator: "\n").first { $0.hasPrefix("post3") })
        #expect(post3.hasSuffix("❤️"))
        #expect(post3.contains("  1  "))
        #expect(screens.contains { $0.contains("1 like ❤️ (you like it)") })
        #expect(result.stderr.isEmpty)
    }

    @Test(arguments: TestBackend.allCases) func appReportsBadInputAndKeepsGoing(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let result = try feedsync("app", "--user", "alice", stdin: "like\nopen post9\ndance\nhelp\n")
        #expect(result.status == 0)
        #expect(
            result.stderr.split(separator: "\n") == [
                "Error: open a post first, such as 'open post1'.",
                "Error: no post \"post9\". See 'feedsync feed' for ids.",
                "Error: unknown command \"dance\". Type 'help' for commands.",
            ])
        #expect(result.stdout.contains("open POST     open a post's detail view"))
    }

    @Test(arguments: TestBackend.allCases) func followSeesALikeFromAnotherProcessAndEndsCleanlyOnSIGINT(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let follower = try RunningCLI(["events", "--follow", "--json", "--since", "8"], environment: environment())
        #expect(follower.waitFor(#"{"seq":9,"#))
        let like = try feedsync("like", "post4", "--user", "carol")
        #expect(like.status == 0, "status \(like.status) (a signal's number if it was killed by one), stderr: \(like.stderr)")
        #expect(follower.waitFor(#"{"seq":10,"kind":"liked","postID":"post4","userID":"carol","likeCount":1,"#))
        #expect(follower.interrupt() == 0)
        let lines = follower.stdout.split(separator: "\n")
        #expect(lines.count == 2)
    }

    @Test(arguments: TestBackend.allCases) func followWithALimitStopsByItself(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let follower = try RunningCLI(["events", "--follow", "--since", "9", "--limit", "1"], environment: environment())
        #expect(follower.waitFor("SEQ"))
        try feedsync("unlike", "post2", "--user", "alice")
        #expect(follower.waitForExit() == 0)
        #expect(follower.stdout.contains("unliked"))
    }

    @Test(arguments: TestBackend.allCases) func watchRedrawsWhenAnotherProcessLikes(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let watcher = try RunningCLI(["watch", "--user", "bob"], environment: environment())
        #expect(watcher.waitFor("post1"))
        try feedsync("like", "post5", "--user", "bob")
        #expect(watcher.waitFor("❤️"))
        #expect(watcher.interrupt() == 0)
        let lastFrame = try #require(watcher.stdout.components(separatedBy: "\n\n").last)
        #expect(lastFrame.split(separator: "\n").first { $0.hasPrefix("post5") }?.hasSuffix("❤️") == true)
    }

    @Test(arguments: TestBackend.allCases) func appShowsAnotherProcessesLikeAsItHappens(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let app = try RunningCLI(["app", "--user", "alice"], environment: environment())
        #expect(app.waitFor("Feed for alice"))
        try feedsync("like", "post1", "--user", "carol")
        #expect(app.waitFor("· carol liked post1 (1 like)"))
        app.send("feed")
        app.send("quit")
        #expect(app.waitForExit() == 0)
    }
}

/// The database an end-to-end test chose (a class, so the suite struct stays copyable).
private final class ChosenDatabase: Sendable {
    let value = Mutex<String?>(nil)
}

/// Results collected from several threads.
private final class LockedResults: Sendable {
    private let results = Mutex<[Result<CLIResult, any Error>]>([])

    func append(_ result: Result<CLIResult, any Error>) { results.withLock { $0.append(result) } }

    var all: [Result<CLIResult, any Error>] { results.withLock { $0 } }
}
