import FeedServer
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A replica of a `feedsync serve` over HTTP, through the CLI: `replica init --from http://… --token`, offline writes,
/// `sync` (exactly once through the server's sync routes), a revoked token, a server that is gone, and
/// `sync --follow` picking up a like made through the server.
// Blocks: waits for `feedsync serve` and `feedsync sync --follow` child processes.
@Suite(.ownThreads) struct ReplicaOverHTTPTests {
    struct Server {
        let dir: TemporaryDirectory
        let location: String
        let child: ChildProcess
        let port: UInt16
        var url: String { "http://127.0.0.1:\(port)" }

        /// `serve` on a source with users alice, bob and posts p1, p2 on `backend`.
        init?(on backend: TestBackend) throws {
            dir = TemporaryDirectory("feedsync-replica-http")
            guard let location = try backend.makeLocation(in: dir, "source") else { return nil }
            self.location = location
            let setup = try FeedService(location: location)
            for user in ["alice", "bob"] { try setup.createUser(id: user) }
            try setup.createPost(id: "p1", authorID: "bob", body: "first")
            try setup.createPost(id: "p2", authorID: "bob", body: "second")
            setup.close()
            child = try ChildProcess(["--db", location, "serve", "--listen", "127.0.0.1:0"], home: dir.path)
            let line = try #require(child.firstLine(), "\(child.stderr)")
            port = try #require(UInt16(line.split(separator: ":").last?.split(separator: "/").first ?? ""))
        }

        func feedsync(_ arguments: String...) throws -> (status: Int32?, stdout: String, stderr: String) {
            try ChildProcess.run(Array(arguments), home: dir.path)
        }

        func token(for user: String) throws -> String {
            let issued = try feedsync("--db", location, "token", "issue", "--user", user)
            try #require(issued.status == 0, "\(issued.stderr)")
            return issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        func stop() {
            child.send(SIGTERM)
            _ = child.waitForExit()
        }
    }

    @Test(arguments: TestBackend.allCases)
    func aReplicaOfAServerSyncsOfflineWritesOnceAndHidesItsToken(on backend: TestBackend) throws {
        guard let server = try Server(on: backend) else { return }
        defer { server.stop() }
        let token = try server.token(for: "alice")
        let replica = server.dir.file("phone.sqlite")
        let made = try server.feedsync("--db", replica, "replica", "init", "--from", server.url, "--user", "alice", "--token", token)
        try #require(made.status == 0, "\(made.stderr)")
        #expect(!made.stdout.contains(token) && !made.stderr.contains(token))

        #expect(try server.feedsync("--db", replica, "like", "p1").status == 0)
        #expect(try server.feedsync("--db", replica, "post", "add", "from the phone").status == 0)
        let synced = try server.feedsync("--db", replica, "sync", "--json")
        #expect(synced.status == 0, "\(synced.stderr)")
        let report = try #require(try JSONSerialization.jsonObject(with: Data(synced.stdout.utf8)) as? [String: Any])
        #expect(report["pushed"] as? Int == 2 && report["rejected"] as? Int == 0 && report["pendingChanges"] as? Int == 0)
        let again = try server.feedsync("--db", replica, "sync", "--json")
        #expect(again.status == 0 && again.stdout.contains(#""pushed":0"#), "\(again.stdout)")

        let source = try FeedService(location: server.location)
        defer { source.close() }
        #expect(try source.likedPostIDs(userID: "alice") == ["p1"])
        #expect(try source.feedPage(viewerID: nil).rows.filter { $0.post.body == "from the phone" }.count == 1)
        let status = try server.feedsync("--db", replica, "status", "--json")
        #expect(status.status == 0 && !status.stdout.contains(token), "the token is never shown")
        #expect(status.stdout.contains(#""replicaOf":"http://token@127.0.0.1:\#(server.port)"#), "\(status.stdout)")
    }

    @Test func aRevokedTokenAndAStoppedServerFailWithTheirStatusAndKeepTheQueue() throws {
        guard let server = try Server(on: .sqlite) else { return }
        let token = try server.token(for: "alice")
        let replica = server.dir.file("phone.sqlite")
        let made = try server.feedsync("--db", replica, "replica", "init", "--from", server.url, "--user", "alice", "--token", token)
        try #require(made.status == 0, "\(made.stderr)")
        let wrong = try server.feedsync(
            "--db", server.dir.file("other.sqlite"), "replica", "init", "--from", server.url, "--user", "alice", "--token", "fst_0_x")
        #expect(wrong.status == 65, "\(wrong.stderr)")
        #expect(!FileManager.default.fileExists(atPath: server.dir.file("other.sqlite")))

        #expect(try server.feedsync("--db", replica, "like", "p2").status == 0)
        let list = try server.feedsync("--db", server.location, "token", "list", "--json")
        let id = try #require(
            ((try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])?["tokens"] as? [[String: Any]])?.first?[
                "id"]
                as? String)
        #expect(try server.feedsync("--db", server.location, "token", "revoke", id).status == 0)
        let refused = try server.feedsync("--db", replica, "sync")
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.contains("not authorized"))

        server.stop()
        let gone = try server.feedsync("--db", replica, "sync")
        #expect(gone.status == 75, "\(gone.stderr)")
        let status = try server.feedsync("--db", replica, "status", "--json")
        #expect(status.stdout.contains(#""pendingChanges":1"#), "the queue was kept: \(status.stdout)")
    }

    @Test func syncFollowOverHTTPPicksUpALikeMadeThroughTheServer() throws {
        guard let server = try Server(on: .sqlite) else { return }
        defer { server.stop() }
        let token = try server.token(for: "alice")
        let bob = try server.token(for: "bob")
        let replica = server.dir.file("phone.sqlite")
        let made = try server.feedsync("--db", replica, "replica", "init", "--from", server.url, "--user", "alice", "--token", token)
        try #require(made.status == 0, "\(made.stderr)")
        let follow = try ChildProcess(["--db", replica, "sync", "--follow", "--json"], home: server.dir.path)
        #expect(follow.firstLine() != nil, "the first sync reported")
        let liked = try HTTPTestClient.request("PUT", "/api/posts/p1/like", port: server.port, headers: ["Authorization": "Bearer \(bob)"])
        #expect(liked.status == 200)
        let deadline = ContinuousClock.now + .seconds(20)
        var count = 0
        while ContinuousClock.now < deadline {
            let shown = try server.feedsync("--db", replica, "show", "p1", "--json")
            if shown.stdout.contains(#""likeCount":1"#) {
                count = 1
                break
            }
        }
        #expect(count == 1, "the replica shows bob's like as a count")
        follow.send(SIGINT)
        #expect(follow.waitForExit() == 0, "\(follow.stderr)")
    }
}
