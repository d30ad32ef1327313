import FeedSync
import FeedSQLite
import FeedSQLiteBackend
import FeedMigrations
import FeedTestSupport
import Foundation
import Synchronization
import FeedTestThreads
import Testing

/// Feed, show, like, events, status, check and seed, run as `feedsync` commands.
extension EndToEndTests {
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
        try #require(try SpawnedProcess.run("/usr/bin/sqlite3", [database, sql]).status == 0)
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
}
