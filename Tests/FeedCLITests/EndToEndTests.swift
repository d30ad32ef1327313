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
// Blocks: waits for `feedsync` child processes (ten at once, and followers).
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
            try tx.userStatements.fetch("SELECT version, count(*) FROM schema_migrations GROUP BY version ORDER BY version", [])
        }
        #expect(rows.map { $0[0].integer } == (1...status.binarySchemaVersion).map { Int64($0) })
        #expect(rows.allSatisfy { $0[1].integer == 1 })
    }

    /// A URL of another scheme is refused before anything is opened or created — otherwise it would be taken for a
    /// relative path (a `mysql:` directory in the working directory) — and its password is not echoed.
    @Test func aURLOfAnotherSchemeIs64AndCreatesNothing() throws {
        let work = TemporaryDirectory("feedsync-cwd")
        for url in ["mysql://root:hunter2@db/feed", "http://example.com/feed.sqlite", "sqlite://x.sqlite"] {
            let (status, _, stderr) = try SpawnedProcess.run(
                CLIRun.executable, ["init", "--db", url], environment: environment(), directory: work.path)
            #expect(status == 64, "\(url)")
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
