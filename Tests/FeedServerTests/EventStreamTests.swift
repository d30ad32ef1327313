import FeedJSON
import FeedServer
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// `GET /api/events`: the log after the cursor, then live, each seq once and in order.
// Blocks: waits for an in-process HTTP server's event streams.
@Suite(.ownThreads) struct EventStreamTests {
    @Test(arguments: TestBackend.allCases)
    func theStreamResumesAfterItsCursorThenGoesLive(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        let fromStart = try EventFollower(port: sut.port, token: "tok-alice")
        let afterFour = try EventFollower(port: sut.port, token: "tok-bob", query: "?after=4")
        let lastEventIDWins = try EventFollower(port: sut.port, token: "tok-bob", query: "?after=1", lastEventID: "5")
        #expect(fromStart.wait { $0.seqs.count == 6 })
        #expect(fromStart.response.status == 200)
        #expect(fromStart.response.headers["content-type"] == "text/event-stream")
        #expect(fromStart.response.headers["cache-control"] == "no-cache")
        #expect(afterFour.wait { $0.seqs == [5, 6] })
        #expect(lastEventIDWins.wait { $0.seqs == [6] })
        let first = try #require(fromStart.received.first)
        let logged = try sut.service.events(after: 0, limit: 1)[0]
        #expect(first.id == "1." + String(format: "%08x", logged.check), "the id is the seq and the event's check")
        #expect(first.data == JSONShapes.event(logged).rendered)
        #expect(first.data.hasPrefix(#"{"seq":1,"kind":"userCreated","postID":null,"userID":"alice","likeCount":null,"at":"20"#))

        try sut.service.like(userID: "bob", postID: "p1")
        try sut.service.unlike(userID: "bob", postID: "p1")
        for follower in [fromStart, afterFour, lastEventIDWins] {
            #expect(follower.wait { $0.seqs.last == 8 })
        }
        #expect(fromStart.seqs == Array(1...8))
        #expect(afterFour.seqs == [5, 6, 7, 8])
        #expect(lastEventIDWins.seqs == [6, 7, 8])
        // Bob's streams show his own like and unlike as they are (another viewer's: aViewerSeesOtherUsersLikesAsCounts).
        for follower in [afterFour, lastEventIDWins] {
            #expect(follower.received.last?.data.contains(#""kind":"unliked","postID":"p1","userID":"bob","likeCount":0"#) == true)
        }
    }

    @Test func theStreamNeedsAToken() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        for token in [nil, "tok-gone"] {
            let follower = try EventFollower(port: sut.port, token: token, query: "?after=0")
            defer { follower.close() }
            #expect(follower.wait { $0.response.status != nil })
            // Checked before reading the answer to its end: an open stream would only end at the read timeout.
            try #require(follower.response.status == 401, "a stream with token \(token ?? "none")")
            #expect(follower.wait { $0.isEnded } && follower.seqs.isEmpty)
            let refused = try sut.request("GET", "/api/events?after=0", token: token)
            #expect(refused.status == 401)
            #expect(refused.headers["content-type"] == "application/json")
            #expect(refused.headers["www-authenticate"] == "Bearer")
            #expect(refused.json["code"] as? String == "unauthorized")
            #expect((refused.json["error"] as? String).map { !$0.isEmpty && !$0.contains("\n") } == true)
        }
    }

    @Test(arguments: TestBackend.allCases)
    func aViewerSeesOtherUsersLikesAsCounts(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        let alice = try EventFollower(port: sut.port, token: "tok-alice", query: "?after=6")
        let bob = try EventFollower(port: sut.port, token: "tok-bob", query: "?after=6")
        try sut.service.like(userID: "alice", postID: "p2")  // seq 7
        try sut.service.like(userID: "bob", postID: "p1")  // 8
        try sut.service.unlike(userID: "bob", postID: "p1")  // 9
        try sut.service.like(userID: "carol", postID: "p3")  // 10
        let logged = try sut.service.events(after: 6)
        try #require(logged.map(\.seq) == [7, 8, 9, 10])
        for follower in [alice, bob] {
            #expect(follower.wait { $0.seqs.count >= 4 })
            #expect(follower.seqs == [7, 8, 9, 10])
            #expect(follower.received.allSatisfy { $0.name == nil })
        }
        // Another user's like as a viewer sees it: the event without its user, as a changed count.
        func asCount(_ index: Int) -> String {
            JSONShapes.event(logged[index]).rendered
                .replacing(/"kind":"(un)?liked"/, with: #""kind":"likeCountChanged""#)
                .replacing(/"userID":"[a-z]+"/, with: #""userID":"""#)
        }
        #expect(alice.received.map(\.data) == [JSONShapes.event(logged[0]).rendered, asCount(1), asCount(2), asCount(3)])
        #expect(
            bob.received.map(\.data) == [
                asCount(0), JSONShapes.event(logged[1]).rendered, JSONShapes.event(logged[2]).rendered, asCount(3),
            ])
        let (seven, nine) = (bob.received.first?.data ?? "", alice.received.dropFirst(2).first?.data ?? "")
        #expect(seven.hasPrefix(#"{"seq":7,"kind":"likeCountChanged","postID":"p2","userID":"","likeCount":1,"at":"20"#))
        #expect(nine.hasPrefix(#"{"seq":9,"kind":"likeCountChanged","postID":"p1","userID":"","likeCount":0,"at":"20"#))
        for follower in [alice, bob] { #expect(!follower.received.contains { $0.data.contains("carol") }) }
    }

    @Test func anIdleStreamGetsKeepAliveComments() throws {
        guard let sut = try ServerFixture(on: .sqlite, heartbeat: 1) else { return }
        defer { sut.close() }
        let follower = try EventFollower(port: sut.port, token: "tok-alice", query: "?after=6")
        #expect(follower.wait { $0.commentCount >= 2 })
        #expect(follower.seqs.isEmpty)
        try sut.service.like(userID: "alice", postID: "p2")
        #expect(follower.wait { $0.seqs == [7] })
    }

    @Test(arguments: TestBackend.allCases)
    func prunedHistoryIsOneEventThenTheEnd(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        try sut.service.like(userID: "alice", postID: "p2")  // seq 7
        _ = try sut.service.pruneEvents(through: 5)
        let stale = try EventFollower(port: sut.port, token: "tok-alice", query: "?after=2")
        #expect(stale.wait { $0.isEnded })
        #expect(stale.received == [EventFollower.Event(id: nil, name: "historyPruned", data: #"{"prunedThrough":5}"#)])
        let current = try EventFollower(port: sut.port, token: "tok-alice", query: "?after=5")
        #expect(current.wait { $0.seqs == [6, 7] })
        // Pruning as far as it goes (the log keeps its last event): a cursor before it is told so.
        _ = try sut.service.pruneEvents(through: 7)
        let older = try EventFollower(port: sut.port, token: "tok-bob", query: "?after=3")
        #expect(older.wait { $0.isEnded })
        #expect(older.received == [EventFollower.Event(id: nil, name: "historyPruned", data: #"{"prunedThrough":6}"#)])
        #expect(current.isEnded == false)
    }

    @Test(arguments: TestBackend.allCases)
    func twoFollowersSeeEverySeqOnceInOrderUnderConcurrentToggles(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        let followers = try ["tok-alice", "tok-bob"].map { try EventFollower(port: sut.port, token: $0, query: "?after=3") }
        let threads = 8
        let togglesPerThread = 40
        let done = DispatchGroup()
        let failures = LockedValue(0)
        let progress = LockedValue(0)
        for thread in 0..<threads {
            done.enter()
            let user = ["alice", "bob", "carol"][thread % 3]
            let post = "p\(thread % 3 + 1)"
            Thread {
                defer { done.leave() }
                for _ in 0..<togglesPerThread {
                    do {
                        try sut.service.toggle(userID: user, postID: post)
                        progress.withLock { $0 += 1 }
                    } catch {
                        failures.withLock { $0 += 1 }
                    }
                }
            }.start()
        }
        #expect(waitWhileProgressing("toggles", progress: { progress.withLock { $0 } }) { done.wait(timeout: $0) })
        #expect(failures.withLock { $0 } == 0)
        let log = try sut.service.events(after: 3).map(\.seq)
        #expect(log.count == 3 + threads * togglesPerThread)
        for follower in followers {
            #expect(
                waitWhileProgressing("follower", progress: { follower.seqs.count }) { _ in
                    follower.wait(timeout: 0.5) { $0.seqs.count >= log.count } ? .success : .timedOut
                })
            #expect(follower.seqs == log)
            #expect(follower.received.allSatisfy { $0.name == nil })
        }
    }

    @Test func stoppingLetsARequestInFlightFinish() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        let answer = LockedValue<HTTPTestResponse?>(nil)
        let done = DispatchSemaphore(value: 0)
        let port = sut.port
        Thread {
            answer.withLock { $0 = try? HTTPTestClient.request("GET", "/api/posts/p1", port: port, token: "tok-slow") }
            done.signal()
        }.start()
        #expect(sut.slowTokenSeen.wait(timeout: .now() + 20) == .success)
        sut.close()
        #expect(done.wait(timeout: .now() + 20) == .success)
        #expect(answer.withLock { $0?.status } == 200)
    }

    @Test func stoppingTheServerEndsOpenStreamsPromptly() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        let followers = [
            try EventFollower(port: sut.port, token: "tok-alice"), try EventFollower(port: sut.port, token: "tok-bob", query: "?after=6"),
        ]
        #expect(followers[0].wait { $0.seqs.count == 6 })
        #expect(followers[1].wait { $0.response.status == 200 })
        let started = ContinuousClock.now
        sut.close()
        #expect(ContinuousClock.now - started < .seconds(5))
        for follower in followers { #expect(follower.wait { $0.isEnded }) }
        #expect(throws: (any Error).self) { try HTTPTestClient.request("GET", "/health", port: sut.port) }
    }
}
