import FeedServer
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// `DELETE /api/posts/{id}` and `DELETE /api/me` over real HTTP on loopback: who may delete what, what refused requests
/// leave (nothing), and what the event streams carry — each deletion once, in its place, naming nobody who was erased.
// Blocks: waits on sockets for an in-process HTTP server's answers and event streams.
@Suite(.ownThreads) struct DeletionRoutesTests {
    @Test(arguments: TestBackend.allCases)
    func onlyItsAuthorDeletesAPostAndEveryStreamGetsTheDeletionOnce(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        let alice = try EventFollower(port: sut.port, token: "tok-alice", query: "?after=6")
        let bob = try EventFollower(port: sut.port, token: "tok-bob", query: "?after=6")
        try sut.service.like(userID: "carol", postID: "p1")  // seq 7
        let refused: [(HTTPTestResponse, Int, String)] = [
            (try sut.request("DELETE", "/api/posts/p1", token: "tok-bob"), 403, "forbidden"),
            (try sut.request("DELETE", "/api/posts/p1"), 401, "unauthorized"),
            (try sut.request("DELETE", "/api/posts/p1", token: "tok-gone"), 401, "unauthorized"),
            (try sut.request("DELETE", "/api/posts/nope", token: "tok-alice"), 404, "postNotFound"),
            (try sut.request("DELETE", "/api/posts/a%20b", token: "tok-alice"), 400, "invalidValue"),
        ]
        for (response, status, code) in refused {
            #expect(response.status == status, "\(response.text)")
            #expect(response.headers["content-type"] == "application/json")
            #expect(response.json["code"] as? String == code, "\(response.text)")
        }
        // The refused requests wrote nothing.
        #expect(try sut.service.events(after: 7).isEmpty)
        #expect(try sut.service.post(id: "p1", viewerID: "carol").post.likeCount == 1)

        let deleted = try sut.request("DELETE", "/api/posts/p1", token: "tok-alice")
        #expect(deleted.status == 200)
        #expect(deleted.headers["content-type"] == "application/json")
        #expect(deleted.text == #"{"postID":"p1","deleted":true,"seq":8}"#)
        let again = try sut.request("DELETE", "/api/posts/p1", token: "tok-alice")
        #expect(again.status == 200)
        #expect(again.text == #"{"postID":"p1","deleted":false,"seq":null}"#)
        // A deleted post keeps no author: deleting it again changes nothing, whoever asks.
        #expect(try sut.request("DELETE", "/api/posts/p1", token: "tok-bob").text == again.text)
        #expect(try sut.request("GET", "/api/posts/p1").json["code"] as? String == "postNotFound")
        #expect(try sut.request("PUT", "/api/posts/p1/like", token: "tok-bob").status == 404)
        let feed = try sut.request("GET", "/api/feed", token: "tok-bob")
        #expect((feed.json["posts"] as? [[String: Any]])?.map { $0["id"] as? String } == ["p3", "p2"])

        // A later commit closes the range: the deletion came once, in its place, to every stream.
        try sut.service.like(userID: "bob", postID: "p2")  // 9
        for follower in [alice, bob] {
            #expect(follower.wait { $0.seqs.last == 9 })
            #expect(follower.seqs == [7, 8, 9])
            let deletion = follower.received.dropFirst().first?.data ?? ""
            #expect(deletion.hasPrefix(#"{"seq":8,"kind":"postDeleted","postID":"p1","userID":"alice","likeCount":null,"at":"20"#))
        }
    }

    @Test(arguments: TestBackend.allCases)
    func deletingMeErasesTheUserRefusesItsTokensAndEndsItsStreams(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        let early = try EventFollower(port: sut.port, token: "tok-carol", query: "?after=6")
        try sut.service.createUser(id: "dave")  // seq 7
        try sut.service.createPost(id: "d1", authorID: "dave", body: "dave's post")  // 8
        try sut.service.like(userID: "dave", postID: "p1")  // 9
        try sut.service.like(userID: "dave", postID: "p2")  // 10
        try sut.service.like(userID: "alice", postID: "d1")  // 11
        let tokens = try [sut.service.issueToken(userID: "dave").token, sut.service.issueToken(userID: "dave").token]
        // The shared tail holds 7…11, naming dave, before the erasure.
        #expect(early.wait { $0.seqs.last == 11 })
        let daves = try tokens.map { try EventFollower(port: sut.port, token: $0, query: "?after=11") }
        let bob = try EventFollower(port: sut.port, token: "tok-bob", query: "?after=11")
        for follower in daves + [bob] { #expect(follower.wait { $0.response.status == 200 }) }

        let erased = try sut.request("DELETE", "/api/me", token: tokens[0])
        #expect(erased.status == 200, "\(erased.text)")
        #expect(erased.text == #"{"userID":"dave","deleted":true,"deletedPosts":1,"removedLikes":2,"seq":15}"#)
        // Every token of the user is refused from now on, by every route; nothing more is written.
        for token in tokens {
            for (method, path) in [("DELETE", "/api/me"), ("GET", "/api/feed"), ("PUT", "/api/posts/p3/like"), ("GET", "/api/events")] {
                let refused = try sut.request(method, path, token: token)
                #expect(refused.status == 401, "\(method) \(path): \(refused.text)")
                #expect(refused.json["code"] as? String == "unauthorized")
            }
        }
        #expect(try sut.service.events(after: 15).isEmpty)
        #expect(try sut.service.post(id: "p1", viewerID: nil).post.likeCount == 0)

        // Dave's streams get the erasure's events, then `event: erased`, and end.
        for follower in daves {
            #expect(follower.wait { $0.isEnded })
            #expect(follower.seqs == [12, 13, 14, 15])
            #expect(follower.received.last == EventFollower.Event(id: nil, name: "erased", data: #"{"lastEventID":15}"#))
        }
        // Everyone else's streams go on, with the erasure naming nobody.
        try sut.service.like(userID: "carol", postID: "p3")  // 16
        #expect(bob.wait { $0.seqs.last == 16 })
        #expect(bob.seqs == [12, 13, 14, 15, 16])
        #expect(
            bob.received.map { kind(of: $0) } == ["postDeleted", "likeCountChanged", "likeCountChanged", "userDeleted", "likeCountChanged"])
        #expect(bob.received.first?.data.contains(#""postID":"d1","userID":"","#) == true)
        #expect(!bob.received.contains { $0.data.contains("dave") })
        // A stream that starts inside the shared tail after the erasure reads it scrubbed, as the log is.
        for (token, query) in [("tok-alice", "?after=6"), ("tok-bob", "?after=0")] {
            let later = try EventFollower(port: sut.port, token: token, query: query)
            #expect(later.wait { $0.seqs.last == 16 })
            #expect(!later.received.contains { $0.data.contains("dave") }, "\(later.received.map(\.data))")
        }
        #expect(early.wait { $0.seqs.last == 16 })
    }

    @Test(arguments: TestBackend.allCases)
    func anErasureByAnotherWriterEndsTheUsersStreamsToo(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        try sut.service.createUser(id: "erin")  // seq 7
        let token = try sut.service.issueToken(userID: "erin").token
        let erin = try EventFollower(port: sut.port, token: token, query: "?after=7")
        let carol = try EventFollower(port: sut.port, token: "tok-carol", query: "?after=7")
        for follower in [erin, carol] { #expect(follower.wait { $0.response.status == 200 }) }
        // Not through this server: it learns of the erasure from the log alone, and looks its streams' users up.
        let erasure = try sut.service.deleteUser(userID: "erin")
        #expect(erasure.seq == 8)
        #expect(erin.wait { $0.isEnded })
        #expect(erin.received.first?.id?.hasPrefix("8.") == true)
        #expect(
            erin.received == [
                EventFollower.Event(id: erin.received.first?.id ?? "", name: nil, data: erin.received.first?.data ?? ""),
                EventFollower.Event(id: nil, name: "erased", data: #"{"lastEventID":8}"#),
            ])
        #expect(erin.received.first?.data.contains(#""kind":"userDeleted""#) == true)
        #expect(carol.wait { $0.seqs == [8] })
        #expect(carol.isEnded == false)
    }

    @Test func aStreamWhoseTokenWasLookedUpBeforeAnErasureIsToldToRetry() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        try sut.service.createUser(id: "erin")  // seq 7
        let carol = try EventFollower(port: sut.port, token: "tok-carol", query: "?after=7")
        #expect(carol.wait { $0.response.status == 200 })
        // `tok-held` is looked up until the fan-out has read the erasure (carol got it), then the stream registers.
        let slow = try EventFollower(port: sut.port, token: "tok-held", query: "?after=7")
        #expect(sut.heldTokenSeen.wait(timeout: .now() + 20) == .success)
        try sut.service.deleteUser(userID: "erin")  // 8
        #expect(carol.wait { $0.seqs == [8] })
        sut.releaseHeldToken.signal()
        #expect(slow.wait { $0.isEnded })
        #expect(slow.response.status == 503)
        #expect(slow.response.headers["retry-after"] == "1")
        // The retry's token is looked up again, after the erasure: alice's stream opens.
        let retried = try EventFollower(port: sut.port, token: "tok-alice", query: "?after=7")
        #expect(retried.wait { $0.seqs == [8] })
    }

    private func kind(of event: EventFollower.Event) -> String {
        ((try? JSONSerialization.jsonObject(with: Data(event.data.utf8))) as? [String: Any])?["kind"] as? String ?? ""
    }
}
