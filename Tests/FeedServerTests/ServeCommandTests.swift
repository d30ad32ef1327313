import FeedServer
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `feedsync serve` as a child process, and commits by other processes reaching the event stream.
// Blocks: waits for `feedsync serve` child processes and their event streams.
@Suite(.ownThreads) struct ServeCommandTests {
    @Test(arguments: TestBackend.allCases)
    func aCommitByAnotherProcessReachesAFollower(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend, watchOtherProcesses: true) else { return }
        defer { sut.close() }
        // Carol follows her own like: her stream shows it with her id.
        let follower = try EventFollower(port: sut.port, token: "tok-carol", query: "?after=6")
        #expect(follower.wait { $0.response.status == 200 })
        let run = try ChildProcess.run(["--db", sut.location, "--user", "carol", "like", "p1"], home: sut.dir.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(follower.wait { $0.seqs == [7] })
        #expect(follower.received.first?.data.contains(#""kind":"liked","postID":"p1","userID":"carol""#) == true)
    }

    /// A commit the service's watch never announced (here no watch runs at all) still reaches the streams: the
    /// fan-out looks at the log's head every second.
    @Test(arguments: TestBackend.allCases)
    func aCommitNobodyAnnouncedReachesAFollowerWithinSeconds(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend, watchOtherProcesses: false) else { return }
        defer { sut.close() }
        let follower = try EventFollower(port: sut.port, token: "tok-carol", query: "?after=6")
        #expect(follower.wait { $0.response.status == 200 })
        let run = try ChildProcess.run(["--db", sut.location, "--user", "carol", "like", "p1"], home: sut.dir.path)
        #expect(run.status == 0, "\(run.stderr)")
        #expect(follower.wait(timeout: 5) { $0.seqs == [7] })
    }

    @Test(arguments: TestBackend.allCases)
    func serveAnswersUntilSIGTERMThenEndsStreamsAndExitsZero(on backend: TestBackend) throws {
        let dir = TemporaryDirectory("feedsync-serve")
        guard let location = try backend.makeLocation(in: dir) else { return }
        let setup = try FeedService(location: location)
        try setup.createUser(id: "alice")
        try setup.createPost(id: "p1", authorID: "alice", body: "served")
        setup.close()
        let issued = try ChildProcess.run(["--db", location, "token", "issue", "--user", "alice"], home: dir.path)
        try #require(issued.status == 0, "\(issued.stderr)")
        let token = issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let child = try ChildProcess(["--db", location, "serve", "--listen", "127.0.0.1:0"], home: dir.path)
        let line = try #require(child.firstLine(), "\(child.stderr)")
        let shown = try FeedLocation(location).description
        #expect(line.hasPrefix("feedsync: serving \(shown) on http://127.0.0.1:"))
        #expect(line.hasSuffix("/ (Ctrl-C to stop)"))
        if backend == .postgresql, let password = URLComponents(string: location)?.password { #expect(!line.contains(password)) }
        let port = try #require(UInt16(line.split(separator: ":").last?.split(separator: "/").first ?? ""))

        let feed = try HTTPTestClient.request("GET", "/api/feed", port: port)
        #expect(feed.status == 200)
        #expect((feed.json["posts"] as? [[String: Any]])?.first?["id"] as? String == "p1")
        let follower = try EventFollower(port: port, token: token)
        #expect(follower.wait { $0.seqs == [1, 2] })

        child.send(SIGTERM)
        #expect(child.waitForExit() == 0, "\(child.stderr)")
        #expect(follower.wait { $0.isEnded })
        #expect(child.stdout.components(separatedBy: "\n").filter { !$0.isEmpty } == [line])
    }

    @Test func serveRefusesABadListenAndATakenPort() throws {
        let dir = TemporaryDirectory("feedsync-serve")
        let database = dir.file("feed.sqlite")
        let setup = try FeedService(location: database)
        setup.close()
        for listen in ["8080", "localhost:8080", "127.0.0.1:99999", "::1:8080", "127.0.0.1:", "[::1]8080"] {
            let run = try ChildProcess.run(["--db", database, "serve", "--listen", listen], home: dir.path)
            #expect(run.status == 64, "\(listen): \(run.stderr)")
            #expect(run.stderr.contains("--listen"))
        }
        let demo = try ChildProcess.run(["--db", database, "serve", "--demo", "--listen", "0.0.0.0:0"], home: dir.path)
        #expect(demo.status == 64)
        #expect(demo.stderr.contains("loopback"))

        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        let taken = try ChildProcess.run(["--db", database, "serve", "--listen", "127.0.0.1:\(sut.port)"], home: dir.path)
        #expect(taken.status == 74)
        #expect(taken.stderr.contains("in use"))
        #expect(taken.stderr.split(separator: "\n").count == 1)
        #expect(taken.stdout.isEmpty)
    }

    @Test func serveDemoFillsAnEmptyDatabase() throws {
        let dir = TemporaryDirectory("feedsync-serve")
        let database = dir.file("demo.sqlite")
        let child = try ChildProcess(["--db", database, "serve", "--demo", "--listen", "[::1]:0"], home: dir.path)
        let line = try #require(child.firstLine(), "\(child.stderr)")
        #expect(line.contains("on http://[::1]:"))
        let port = try #require(UInt16(line.split(separator: ":").last?.split(separator: "/").first ?? ""))
        let feed = try HTTPTestClient.request("GET", "/api/feed", port: port, host: "::1")
        #expect((feed.json["posts"] as? [[String: Any]])?.count == 5)
        child.send(SIGINT)
        #expect(child.waitForExit() == 0)
    }
}
