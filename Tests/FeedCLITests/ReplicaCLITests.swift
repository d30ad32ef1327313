import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Synchronization
import Testing

/// `replica init`, `sync`, `sync --follow` and commands on a replica, run with the built `feedsync` on real files
/// (and a PostgreSQL source where the test server is configured).
///
/// The source is `feedsync demo`'s: users alice, bob and carol; post1…post5; alice likes post2 (9 events).
// Blocks: waits for `feedsync` child processes.
@Suite(.ownThreads) struct ReplicaCLITests {
    let home = TemporaryDirectory("feedsync-replica")
    /// The replica: a SQLite file in `home`.
    var replica: String { home.file("replica.sqlite") }

    func environment(_ extra: [String: String] = [:]) -> [String: String] {
        CLIRun.environment(home: home.path, extra)
    }

    /// Runs `feedsync` on `db`.
    @discardableResult
    func feedsync(_ db: String, _ arguments: String..., env: [String: String] = [:]) throws -> CLIResult {
        try CLIRun.run(["--db", db] + arguments, environment: environment(env))
    }

    /// A source with the demo data on `backend`; `nil` when that backend's test server is not configured.
    func makeSource(on backend: TestBackend) throws -> String? {
        guard let source = try backend.makeLocation(in: home, "source") else { return nil }
        let demo = try feedsync(source, "demo")
        try #require(demo.status == 0, "\(demo.stderr)")
        return source
    }

    /// `replica init` of `replica` from `source` for `user`, which must succeed.
    func initReplica(from source: String, user: String = "alice") throws {
        let made = try feedsync(replica, "replica", "init", "--from", source, "--user", user)
        try #require(made.status == 0, "\(made.stderr)")
    }

    func json(_ text: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not a JSON object: \(text)")
    }

    /// `status --json` of `db`.
    func status(_ db: String) throws -> [String: Any] {
        let result = try feedsync(db, "status", "--json")
        try #require(result.status == 0, "\(result.stderr)")
        return try json(result.stdout)
    }

    /// `show POST --json` on `db` as `user`: whether the user likes it, and its count.
    func post(_ postID: String, on db: String, as user: String? = nil) throws -> (liked: Bool, likeCount: Int) {
        let result = try CLIRun.run(
            ["--db", db, "show", postID, "--json"] + (user.map { ["--user", $0] } ?? []), environment: environment())
        try #require(result.status == 0, "\(result.stderr)")
        let object = try json(result.stdout)
        return (try #require(object["liked"] as? Bool), try #require(object["likeCount"] as? Int))
    }

    func expectOneLineFailure(_ result: CLIResult, status: Int32, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == status, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
        #expect(
            result.stderr.hasPrefix("Error: ") && result.stderr.split(separator: "\n").count == 1, "\(result.stderr)",
            sourceLocation: sourceLocation)
    }

    // MARK: - replica init

    @Test(arguments: TestBackend.allCases)
    func initCopiesTheUsersViewOfTheSourceAndNamesItWithoutPassword(on backend: TestBackend) throws {
        guard let source = try makeSource(on: backend) else { return }
        let made = try feedsync(replica, "replica", "init", "--from", source, "--user", "alice")
        #expect(made.status == 0, "\(made.stderr)")
        let shownSource = FeedLocation.redacted(source)
        #expect(made.stdout == "\(replica) is a replica of \(shownSource) for alice (5 posts)\n")
        #expect(made.stderr.isEmpty)
        if let password = URLComponents(string: source)?.password {
            #expect(!made.stdout.contains(password))
        }
        // The replica shows what the source shows alice: the same posts, counts and hearts.
        let mine = try feedsync(replica, "feed", "--json")
        let theirs = try feedsync(source, "feed", "--json", "--user", "alice")
        #expect(mine.status == 0 && theirs.status == 0)
        #expect(mine.stdout == theirs.stdout)
        #expect(try post("post2", on: replica) == (true, 1), "the viewer defaults to the replica's user")
    }

    @Test func initIntoADatabaseWithDataIs65AndChangesNothing() throws {
        guard let source = try makeSource(on: .sqlite) else { return }
        let other = home.file("other.sqlite")
        try #require(try feedsync(other, "demo").status == 0)
        let before = try #require(fileBytes(other))
        let refused = try feedsync(other, "replica", "init", "--from", source, "--user", "alice")
        expectOneLineFailure(refused, status: 65)
        #expect(refused.stderr.contains("has data"))
        #expect(fileBytes(other) == before)
        #expect(try status(other)["replicaOf"] == nil)
        // A replica already is refused the same way.
        try initReplica(from: source)
        let again = try feedsync(replica, "replica", "init", "--from", source, "--user", "bob")
        expectOneLineFailure(again, status: 65)
        #expect(try status(replica)["user"] as? String == "alice")
    }

    @Test func aFailedInitLeavesTheDatabaseAsItWas() throws {
        guard let source = try makeSource(on: .sqlite) else { return }
        // Unknown at the source: 65, and the new file never appears.
        let unknown = try feedsync(replica, "replica", "init", "--from", source, "--user", "zed")
        expectOneLineFailure(unknown, status: 65)
        #expect(unknown.stderr.contains(#"the source has no account "zed""#))
        // Unreachable: 75.
        let unreachable = try feedsync(replica, "replica", "init", "--from", home.file("missing.sqlite"), "--user", "alice")
        expectOneLineFailure(unreachable, status: 75)
        #expect(try FileManager.default.contentsOfDirectory(atPath: home.path).sorted() == ["source.sqlite"])
        // An existing empty database stays an empty database that is no replica.
        try #require(try feedsync(replica, "init").status == 0)
        expectOneLineFailure(try feedsync(replica, "replica", "init", "--from", source, "--user", "zed"), status: 65)
        let after = try status(replica)
        #expect(after["replicaOf"] == nil && after["users"] as? Int == 0)
        #expect(!FileManager.default.fileExists(atPath: replica + "-wal"))
        // …and can still become one.
        try initReplica(from: source, user: "bob")
        #expect(try status(replica)["user"] as? String == "bob")
    }

    @Test func initRefusesAnHTTPSourceWithoutATokenAndAPostgreSQLReplicaWith64() throws {
        let http = try feedsync(replica, "replica", "init", "--from", "https://sync:hunter2@feed.example/api", "--user", "alice")
        expectOneLineFailure(http, status: 64)
        #expect(http.stderr.contains("needs the user's token: pass --token or set FEEDSYNC_TOKEN"))
        #expect(!http.stderr.contains("hunter2"))
        let postgres = try feedsync(
            "postgresql://app:hunter2@127.0.0.1:1/feed", "replica", "init", "--from", home.file("s.sqlite"), "--user", "alice")
        expectOneLineFailure(postgres, status: 64)
        #expect(!postgres.stderr.contains("hunter2"))
        let missingFrom = try feedsync(replica, "replica", "init", "--user", "alice")
        expectOneLineFailure(missingFrom, status: 64)
        #expect(try FileManager.default.contentsOfDirectory(atPath: home.path).isEmpty)
    }

    // MARK: - sync

    @Test(arguments: TestBackend.allCases)
    func anOfflineLikeSyncsOnceWithExactNumbers(on backend: TestBackend) throws {
        guard let source = try makeSource(on: backend) else { return }
        try initReplica(from: source)
        let liked = try feedsync(replica, "like", "post4", "--json")
        #expect(liked.status == 0, "\(liked.stderr)")
        #expect(try post("post4", on: replica) == (true, 1), "shown at once on the replica")
        #expect(try post("post4", on: source, as: "alice") == (false, 0), "not at the source before a sync")
        #expect(try status(replica)["pendingChanges"] as? Int == 1)
        let synced = try feedsync(replica, "sync", "--json")
        #expect(synced.status == 0, "\(synced.stderr)")
        // The source's log: 9 demo events, then alice's like (seq 10), which comes back as the one change pulled.
        #expect(synced.stdout == #"{"pushed":1,"pulled":1,"rejected":0,"pendingChanges":0,"lastSyncedSeq":10}"# + "\n")
        #expect(try post("post4", on: source, as: "alice") == (true, 1))
        #expect(try status(source)["lastSeq"] as? Int == 10)
        // Nothing new either way: nothing moves, and the like was applied once.
        let again = try feedsync(replica, "sync")
        #expect(again.stdout == "pushed 0, pulled 0, rejected 0, 0 pending, at seq 10\n")
        #expect(try status(source)["lastSeq"] as? Int == 10)
    }

    @Test(arguments: TestBackend.allCases)
    func statusOnAReplicaShowsItsSourceUserQueueAndCursor(on backend: TestBackend) throws {
        guard let source = try makeSource(on: backend) else { return }
        // The plain status keys, before the replica exists, and on the source.
        let plainKeys: Set<String> = [
            "path", "backend", "server", "primary", "schemaVersion", "binarySchemaVersion", "pendingMigrations", "users", "posts", "likes",
            "events",
            "lastSeq",
        ]
        #expect(Set(try status(source).keys) == plainKeys)
        try initReplica(from: source, user: "bob")
        try feedsync(replica, "like", "post1")
        try feedsync(replica, "toggle", "post3")
        let result = try feedsync(replica, "status", "--json")
        #expect(result.status == 0, "\(result.stderr)")
        let object = try json(result.stdout)
        #expect(
            Set(object.keys)
                == plainKeys.union(["replicaOf", "user", "pendingChanges", "rejectedChanges", "lastSyncedSeq", "lastSyncAt", "lastError"]))
        #expect(object["replicaOf"] as? String == FeedLocation.redacted(source))
        #expect(object["user"] as? String == "bob")
        #expect(object["pendingChanges"] as? Int == 2)
        #expect(object["rejectedChanges"] as? Int == 0)
        #expect(object["lastSyncedSeq"] as? Int == 9)
        #expect(object["lastError"] is NSNull)
        #expect(object["lastSyncAt"] is String)
        let text = try feedsync(replica, "status")
        #expect(text.stdout.contains("replica of          \(FeedLocation.redacted(source))\n"))
        #expect(text.stdout.contains("pending changes     2\n"))
        if let password = URLComponents(string: source)?.password {
            #expect(!result.stdout.contains(password) && !text.stdout.contains(password))
        }
    }

    @Test func aPasswordInTheSourcesQueryIsNeverShown() throws {
        guard let url = try TestBackend.postgresql.makeLocation(in: home, "source"),
            var components = URLComponents(string: url), let password = components.password
        else { return }
        components.password = nil
        components.queryItems = [URLQueryItem(name: "password", value: password)]
        let source = try #require(components.string)
        try #require(try feedsync(source, "demo").status == 0)
        let made = try feedsync(replica, "replica", "init", "--from", source, "--user", "alice")
        #expect(made.status == 0, "\(made.stderr)")
        let shown = try feedsync(replica, "status", "--json")
        for output in [made.stdout, made.stderr, shown.stdout] { #expect(!output.contains(password)) }
        #expect(try json(shown.stdout)["replicaOf"] as? String == FeedLocation.redacted(source))
    }

    @Test func syncWithTheSourceGoneIs75KeepsTheQueueAndWorksOnceItIsBack() throws {
        guard let source = try makeSource(on: .sqlite) else { return }
        try initReplica(from: source)
        try feedsync(replica, "unlike", "post2")
        try feedsync(replica, "like", "post5")
        let away = home.file("away.sqlite")
        try FileManager.default.moveItem(atPath: source, toPath: away)
        let failed = try feedsync(replica, "sync")
        expectOneLineFailure(failed, status: 75)
        #expect(failed.stderr.contains("the source is unavailable"))
        let queued = try status(replica)
        #expect(queued["pendingChanges"] as? Int == 2)
        #expect((queued["lastError"] as? String)?.contains("unavailable") == true)
        #expect(try post("post2", on: replica) == (false, 0), "local changes stay shown")
        try FileManager.default.moveItem(atPath: away, toPath: source)
        let synced = try feedsync(replica, "sync", "--json")
        #expect(synced.stdout == #"{"pushed":2,"pulled":2,"rejected":0,"pendingChanges":0,"lastSyncedSeq":11}"# + "\n")
        #expect(try post("post2", on: source, as: "alice") == (false, 0))
        #expect(try post("post5", on: source, as: "alice") == (true, 1))
        #expect(try status(replica)["lastError"] is NSNull)
    }

    @Test func syncOnADatabaseThatIsNoReplicaIs64() throws {
        guard let source = try makeSource(on: .sqlite) else { return }
        let result = try feedsync(source, "sync")
        expectOneLineFailure(result, status: 64)
        #expect(result.stderr.contains("not a replica") && result.stderr.contains("feedsync replica init"))
        expectOneLineFailure(try feedsync(source, "sync", "--follow"), status: 64)
    }

    // MARK: - Commands on a replica

    @Test func anotherUserOnAReplicaIs64AndWritesNothing() throws {
        guard let source = try makeSource(on: .sqlite) else { return }
        try initReplica(from: source)
        let before = try status(replica)
        for result in [
            try feedsync(replica, "like", "post1", "--user", "bob"),
            try feedsync(replica, "toggle", "post1", env: ["FEEDSYNC_USER": "carol"]),
            try feedsync(replica, "post", "add", "--author", "bob", "hello"),
            try feedsync(replica, "feed", "--user", "bob"),
        ] {
            expectOneLineFailure(result, status: 64)
            #expect(result.stderr.contains(#"acts only as "alice""#), "\(result.stderr)")
        }
        let after = try status(replica)
        #expect(after["events"] as? Int == before["events"] as? Int)
        #expect(after["pendingChanges"] as? Int == 0)
        #expect(try post("post1", on: replica) == (false, 0))
        // The replica's own user, named or not, works; a user cannot be created on a replica.
        #expect(try feedsync(replica, "like", "post1", "--user", "alice").status == 0)
        let added = try feedsync(replica, "post", "add", "--id", "mine", "written offline")
        #expect(added.stdout == "mine\n")
        #expect(try feedsync(replica, "show", "mine", "--json").stdout.contains(#""author":"alice""#))
        let user = try feedsync(replica, "user", "add", "dave")
        expectOneLineFailure(user, status: 65)
        #expect(user.stderr.contains("a replica cannot create users"))
        // Off a replica, --author and --user stay required.
        let noAuthor = try feedsync(source, "post", "add", "hello")
        #expect(noAuthor.status == 64)
        #expect(noAuthor.stderr.contains("--author"))
        #expect(try feedsync(source, "like", "post1").status == 64)
        #expect(try feedsync(home.file("none.sqlite"), "like", "post1").status == 64, "a missing user is reported before the database")
    }

    // MARK: - Help

    @Test func helpAndCompletionsListTheReplicaCommands() throws {
        let overview = try CLIRun.run(["--help"], environment: environment())
        #expect(overview.stdout.contains("\n  replica init  Make a new or empty SQLite database a replica"))
        #expect(overview.stdout.contains("\n  sync          Sync a replica with its source"))
        let group = try CLIRun.run(["replica", "--help"], environment: environment())
        #expect(group.status == 0 && group.stdout.contains("Usage: feedsync replica <command> [options]"))
        let sync = try CLIRun.run(["sync", "--help"], environment: environment())
        #expect(
            sync.stdout.hasPrefix(
                "Sync a replica with its source: push its local changes, then pull the source's.\n\nUsage: feedsync sync [--follow]\n"))
        #expect(sync.stdout.contains("75 the source unreachable"))
        let like = try CLIRun.run(["like", "--help"], environment: environment())
        #expect(like.stdout.contains("On a replica it defaults to the replica's user"))
        let bash = try CLIRun.run(["completions", "bash"], environment: environment())
        for word in ["replica", "sync", "--from", "--follow"] { #expect(bash.stdout.contains(word), "\(word)") }
    }

    // MARK: - sync --follow

    @Test(arguments: TestBackend.allCases)
    func followPicksUpAnotherProcessesLikeAndEndsWithZeroOnSIGINT(on backend: TestBackend) throws {
        guard let source = try makeSource(on: backend) else { return }
        try initReplica(from: source)
        let follower = try RunningCLI(["--db", replica, "sync", "--follow", "--json"], environment: environment())
        #expect(follower.waitFor(#""lastSyncedSeq":9}"#), "the first sync's line")
        let like = try feedsync(source, "like", "post3", "--user", "carol")
        try #require(like.status == 0, "\(like.stderr)")
        // Poll the replica until the like arrived, bounded by a deadline.
        let deadline = Date().addingTimeInterval(30)
        var count = try post("post3", on: replica).likeCount
        while count != 1, Date() < deadline {
            count = try post("post3", on: replica).likeCount
        }
        #expect(count == 1, "the follower did not bring carol's like within 30 s; stderr: \(follower.stderr)")
        #expect(follower.waitFor(#"{"pushed":0,"pulled":1,"rejected":0,"pendingChanges":0,"lastSyncedSeq":10}"#))
        #expect(follower.interrupt() == 0)
        #expect(follower.stderr.isEmpty)
    }
}
