import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// The protocol's messages and the endpoint's answers: versioned JSON, bad requests refused with nothing written,
/// clients bound to one user, and a following replica that sees the source's changes and pushes its own by itself.
@Suite struct SyncProtocolTests {
    @Test func messagesRoundTripThroughJSONWithMillisecondTimes() throws {
        let push = PushRequest(
            clientID: "c1",
            mutations: [
                SyncMutation(number: 1, kind: .like, postID: "p1"), SyncMutation(number: 2, kind: .createPost, postID: "p9", body: "hi"),
            ])
        let json = try String(decoding: JSONEncoder().encode(push), as: UTF8.self)
        #expect(json.contains(#""version":3"#) && json.contains(#""kind":"createPost""#))
        #expect(try JSONDecoder().decode(PushRequest.self, from: Data(json.utf8)) == push)
        let pull = PullResponse(
            changes: [SyncChange(seq: 7, kind: .likeCount, postID: "p1", likeCount: 3, at: 1_700_000_000_123)],
            snapshot: nil, resync: false, through: 7, bulkGeneration: 0, hasMore: false, lastMutation: 2)
        #expect(try JSONDecoder().decode(PullResponse.self, from: JSONEncoder().encode(pull)) == pull)
    }

    @Test(arguments: TestBackend.allCases)
    func badRequestsAreRefusedWithTheRightStatusAndNothingWritten(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        let endpoint = SyncEndpoint(service: world.source)
        let before = try await world.source.status().lastSeq
        let cases: [(String, SyncEndpoint.Route, String, Int)] = [
            ("not JSON", .push, "{", 400),
            ("the version before snapshot pages", .push, #"{"version":1,"clientID":"c1","mutations":[]}"#, 400),
            ("another version", .pull, #"{"version":4,"clientID":"c1","bulkGeneration":0}"#, 400),
            (
                "numbers going back", .push,
                #"{"version":3,"clientID":"c1","mutations":[{"number":2,"kind":"like","postID":"p1"},{"number":1,"kind":"like","postID":"p2"}]}"#,
                400
            ),
            ("a zero number", .push, #"{"version":3,"clientID":"c1","mutations":[{"number":0,"kind":"like","postID":"p1"}]}"#, 400),
            ("a bad client id", .push, #"{"version":3,"clientID":"","mutations":[]}"#, 400),
            ("an unknown kind", .push, #"{"version":3,"clientID":"c1","mutations":[{"number":1,"kind":"smash","postID":"p1"}]}"#, 400),
            ("a negative cursor", .pull, #"{"version":3,"clientID":"c1","after":-1,"bulkGeneration":0}"#, 400),
            ("a huge limit", .pull, #"{"version":3,"clientID":"c1","after":0,"bulkGeneration":0,"limit":100000000}"#, 400),
            (
                "a snapshot past the head", .pull,
                #"{"version":3,"clientID":"c1","bulkGeneration":0,"snapshot":{"through":999999,"bulkGeneration":0,"resync":false,"usersDone":true}}"#,
                400
            ),
        ]
        for (label, route, body, status) in cases {
            let answer = await endpoint.respond(to: route, body: Data(body.utf8), userID: "alice")
            #expect(answer.status == status, "\(label)")
            let error = try JSONDecoder().decode([String: String].self, from: answer.body)
            #expect(error["code"] == "invalidRequest" || error["code"] == "unsupportedVersion", "\(label): \(error)")
        }
        let oversized = PushRequest(
            clientID: "c1",
            mutations: (1...Int64(SyncProtocol.maximumPushSize + 1)).map { SyncMutation(number: $0, kind: .like, postID: "p1") })
        await #expect(throws: SyncError.self) { try await endpoint.push(oversized, userID: "alice") }
        #expect(try await world.source.status().lastSeq == before, "nothing was written")
        #expect(try world.source.firstColumn("SELECT count(*) FROM sync_clients") == [.integer(0)])

        // A client id belongs to the user who used it first.
        let first = await endpoint.respond(
            to: .push, body: Data(#"{"version":3,"clientID":"c1","mutations":[{"number":1,"kind":"like","postID":"p1"}]}"#.utf8),
            userID: "alice")
        #expect(first.status == 200)
        for route in SyncEndpoint.Route.allCases {
            let body =
                route == .push
                ? #"{"version":3,"clientID":"c1","mutations":[{"number":2,"kind":"unlike","postID":"p1"}]}"#
                : #"{"version":3,"clientID":"c1","after":0,"bulkGeneration":0}"#
            let stolen = await endpoint.respond(to: route, body: Data(body.utf8), userID: "bob")
            #expect(stolen.status == 403, "\(route)")
        }
        let unknown = await endpoint.respond(
            to: .pull, body: Data(#"{"version":3,"clientID":"c2","bulkGeneration":0}"#.utf8), userID: "zed")
        #expect(unknown.status == 403)
        #expect(try await world.source.likedPostIDs(userID: "alice") == ["p1"])
        #expect(try await world.source.likedPostIDs(userID: "bob").isEmpty)
    }

    @Test(arguments: TestBackend.allCases)
    func aPullStepConfirmsOnlyMutationsWhoseEffectItContains(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        let transport = world.transport(for: "alice")
        let start = try await world.source.status().lastSeq
        _ = try await transport.push(PushRequest(clientID: "c1", mutations: [SyncMutation(number: 1, kind: .like, postID: "p1")]))
        try await world.source.like(userID: "bob", postID: "p2")
        _ = try await transport.push(PushRequest(clientID: "c1", mutations: [SyncMutation(number: 2, kind: .like, postID: "p2")]))
        let firstStep = try await transport.pull(PullRequest(clientID: "c1", after: start, limit: 1))
        #expect(firstStep.changes.map(\.kind) == [.like] && firstStep.hasMore)
        #expect(firstStep.lastMutation == nil, "mutation 2 was applied after this step's seq")
        let rest = try await transport.pull(PullRequest(clientID: "c1", after: firstStep.through))
        #expect(rest.changes.map(\.kind) == [.likeCount, .like] && !rest.hasMore)
        #expect(rest.lastMutation == 2)
        #expect(rest.changes[0].userID == nil, "another user's like carries no user id")
    }

    @Test(arguments: TestBackend.allCases)
    func aFollowingReplicaSeesTheSourceAndPushesItsOwnWritesByItself(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        let phone = try await world.replica("phone", of: "alice")
        let following = Task(executorPreference: ThreadPerJobExecutor.shared) { try await phone.sync.follow() }
        defer { following.cancel() }
        try await world.source.like(userID: "bob", postID: "p1")
        #expect(
            await holds(within: 10) { (try? phone.service.post(id: "p1", viewerID: "alice").post.likeCount) == 1 },
            "the source's like arrived")
        try await phone.service.like(userID: "alice", postID: "p2")
        #expect(
            await holds(within: 10) { (try? world.source.likedPostIDs(userID: "alice")) == ["p2"] }, "the local like reached the source")
        #expect(await holds(within: 10) { (try? phone.service.replicaStatus()?.pendingChanges) == 0 }, "and was confirmed")
        following.cancel()
        try await following.value
    }
}

/// Polls `predicate` until it holds or `seconds` passed; returns whether it held.
func holds(within seconds: Double, _ predicate: @Sendable () async -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if await predicate() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return await predicate()
}
