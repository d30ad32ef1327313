import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Two `feedsync serve` processes on one database — one PostgreSQL database, as on several machines, or one SQLite
/// file on one machine: a like through either reaches both event streams once and in order and shows in the other's
/// answers, a token issued or revoked once holds on both at once, and a user erased through one is refused by both at
/// once, with their streams on both ended.
// Blocks: waits for two `feedsync serve` child processes and their event streams.
@Suite(.ownThreads, .heavy) struct MultiInstanceTests {
    @Test(arguments: TestBackend.allCases)
    func twoServersOnOneDatabaseShareCommitsAndTokens(on backend: TestBackend) throws {
        let dir = TemporaryDirectory("feedsync-multi")
        guard let location = try backend.makeLocation(in: dir) else { return }
        let setup = try FeedService(location: location)
        for user in ["alice", "bob"] { try setup.createUser(id: user) }
        try setup.createPost(id: "p1", authorID: "bob", body: "first")
        try setup.createPost(id: "p2", authorID: "bob", body: "second")
        setup.close()
        let issued = try ChildProcess.run(["--db", location, "token", "issue", "--user", "alice"], home: dir.path)
        try #require(issued.status == 0, "\(issued.stderr)")
        let token = issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)

        let serverA = try ServeProcess(database: location, home: dir.path)
        defer { serverA.stop() }
        let serverB = try ServeProcess(database: location, home: dir.path)
        defer { serverB.stop() }
        let (a, b) = (serverA.port, serverB.port)
        let start = try #require(try HTTPTestClient.request("GET", "/health", port: b).json["lastSeq"] as? Int)
        let followers = try [a, b].map { try EventFollower(port: $0, token: token, query: "?after=\(start)") }
        defer { for follower in followers { follower.close() } }
        for follower in followers { #expect(follower.wait { $0.response.status == 200 }) }

        // A like through A, one through B, an unlike through A: each server's stream has all three, once, in order.
        var seqs: [Int64] = []
        for (port, method, post) in [(a, "PUT", "p1"), (b, "PUT", "p2"), (a, "DELETE", "p1")] {
            let answer = try HTTPTestClient.request(method, "/api/posts/\(post)/like", port: port, token: token)
            #expect(answer.status == 200, "\(answer.text)")
            seqs.append(try #require((answer.json["seq"] as? NSNumber)?.int64Value))
            if method == "PUT" {
                // The other server's answers show the like at once after it was answered.
                let other = port == a ? b : a
                let detail = try HTTPTestClient.request("GET", "/api/posts/\(post)", port: other, token: token)
                #expect(detail.json["likeCount"] as? Int == 1 && detail.json["liked"] as? Bool == true, "\(detail.text)")
                let feed = try HTTPTestClient.request("GET", "/api/feed", port: other, token: token)
                let entry = (feed.json["posts"] as? [[String: Any]])?.first { $0["id"] as? String == post }
                #expect(entry?["liked"] as? Bool == true, "\(feed.text)")
            }
        }
        #expect(seqs == seqs.sorted() && Set(seqs).count == 3)
        for (follower, name) in zip(followers, ["A", "B"]) {
            #expect(follower.wait { $0.seqs.count >= 3 }, "server \(name)'s stream: \(follower.seqs)")
            #expect(follower.seqs == seqs, "server \(name)'s stream")
            #expect(follower.received.first?.data.contains(#""kind":"liked","postID":"p1","userID":"alice""#) == true)
        }
        let afterUnlike = try HTTPTestClient.request("GET", "/api/posts/p1", port: b, token: token)
        #expect(afterUnlike.json["likeCount"] as? Int == 0 && afterUnlike.json["liked"] as? Bool == false)

        // Revoked once, refused at once by both (each request looks its token up).
        let list = try ChildProcess.run(["--db", location, "token", "list", "--json"], home: dir.path)
        let tokens = (try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [String: Any])?["tokens"] as? [[String: Any]]
        let id = try #require(tokens?.first?["id"] as? String, "\(list.stdout)")
        #expect(try ChildProcess.run(["--db", location, "token", "revoke", id], home: dir.path).status == 0)
        for port in [a, b] {
            let refused = try HTTPTestClient.request("PUT", "/api/posts/p2/like", port: port, token: token)
            #expect(refused.status == 401, "\(refused.text)")
            #expect(refused.json["code"] as? String == "unauthorized")
            #expect(try HTTPTestClient.request("GET", "/api/feed", port: port, token: token).status == 401)
        }
        // Nothing was committed by the refused requests: both streams still end at the unlike.
        #expect(try HTTPTestClient.request("GET", "/health", port: a).json["lastSeq"] as? Int == Int(seqs[2]))
        #expect(serverA.stop() == 0, "\(serverA.log)")
        #expect(serverB.stop() == 0, "\(serverB.log)")
    }

    @Test(arguments: TestBackend.allCases)
    func aUserErasedThroughOneServerIsRefusedAndItsStreamsEndOnBoth(on backend: TestBackend) throws {
        let dir = TemporaryDirectory("feedsync-multi")
        guard let location = try backend.makeLocation(in: dir) else { return }
        let setup = try FeedService(location: location)
        for user in ["alice", "bob"] { try setup.createUser(id: user) }
        try setup.createPost(id: "p1", authorID: "bob", body: "first")
        try setup.createPost(id: "a1", authorID: "alice", body: "alice's")
        try setup.like(userID: "alice", postID: "p1")
        let tokens = try [setup.issueToken(userID: "alice").token, setup.issueToken(userID: "alice").token]
        let bobToken = try setup.issueToken(userID: "bob").token
        setup.close()

        let serverA = try ServeProcess(database: location, home: dir.path)
        defer { serverA.stop() }
        let serverB = try ServeProcess(database: location, home: dir.path)
        defer { serverB.stop() }
        let (a, b) = (serverA.port, serverB.port)
        let start = try #require(try HTTPTestClient.request("GET", "/health", port: a).json["lastSeq"] as? Int)
        let alices = try [(a, tokens[0]), (b, tokens[1])].map { try EventFollower(port: $0, token: $1, query: "?after=\(start)") }
        let bobs = try [a, b].map { try EventFollower(port: $0, token: bobToken, query: "?after=\(start)") }
        defer { for follower in alices + bobs { follower.close() } }
        for follower in alices + bobs { #expect(follower.wait { $0.response.status == 200 }) }

        let erased = try HTTPTestClient.request("DELETE", "/api/me", port: b, token: tokens[0])
        #expect(erased.status == 200, "\(erased.text)")
        #expect(erased.json["deletedPosts"] as? Int == 1 && erased.json["removedLikes"] as? Int == 1, "\(erased.text)")
        let seq = try #require((erased.json["seq"] as? NSNumber)?.int64Value)
        // Both servers refuse both tokens at once: authentication reads the tokens table, which the erasure emptied.
        for port in [a, b] {
            for token in tokens {
                #expect(try HTTPTestClient.request("PUT", "/api/posts/p1/like", port: port, token: token).status == 401)
                #expect(try HTTPTestClient.request("GET", "/api/events", port: port, token: token).status == 401)
            }
        }
        // Her streams on both servers end after the erasure's events; bob's go on, naming nobody.
        let erasure = Array(Int64(start + 1)...seq)
        for (follower, name) in zip(alices, ["A", "B"]) {
            #expect(follower.wait { $0.isEnded }, "server \(name)")
            #expect(follower.seqs == erasure, "server \(name)")
            #expect(follower.received.last == EventFollower.Event(id: nil, name: "erased", data: "{\"lastEventID\":\(seq)}"))
        }
        for (follower, name) in zip(bobs, ["A", "B"]) {
            #expect(follower.wait { $0.seqs.last == seq }, "server \(name)")
            #expect(follower.seqs == erasure, "server \(name)")
            #expect(!follower.received.contains { $0.data.contains("alice") }, "server \(name)")
            #expect(follower.isEnded == false)
        }
        #expect(serverA.stop() == 0, "\(serverA.log)")
        #expect(serverB.stop() == 0, "\(serverB.log)")
    }
}
