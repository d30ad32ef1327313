import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// Replicas drop what their source deleted: a pulled post deletion, a resync after one, a queued like on a deleted post
/// (rejected, never blocking), and an erasure — the erased user's replica is told so and keeps its data, the other
/// users' replicas lose the user, their posts and likes.
@Suite struct ReplicaDeletionTests {
    @Test(arguments: TestBackend.allCases)
    func aPulledPostDeletionRemovesThePostItsLikesAndItsCount(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        try await world.source.like(userID: "alice", postID: "p1")
        try await world.source.like(userID: "bob", postID: "p1")
        let phone = try await world.replica("phone", of: "alice")
        #expect(try await phone.service.feedPage(viewerID: "alice").rows.map(\.post.id) == ["p2", "p1"])
        try await world.source.deletePost(postID: "p1", by: "bob")
        let report = try await phone.sync.sync()
        #expect(report.pulled == 1 && report.pendingChanges == 0)
        #expect(try await phone.service.feedPage(viewerID: "alice").rows.map(\.post.id) == ["p2"])
        #expect(try await phone.service.likedPostIDs(userID: "alice").isEmpty)
        let last = try #require(try await phone.service.events(after: 0).last)
        #expect(last.kind == .postDeleted && last.postID == "p1")
        #expect(try phone.service.firstColumn("SELECT count(*) FROM likes") == [.integer(0)])
        try world.expectAgrees(phone)
        // A local like of it now fails as on the source.
        await #expect(throws: FeedError.postNotFound("p1")) { try await phone.service.like(userID: "alice", postID: "p1") }
    }

    @Test(arguments: TestBackend.allCases)
    func aResyncDropsPostsTheSourceDeletedMeanwhile(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        try await world.source.like(userID: "alice", postID: "p2")
        let phone = try await world.replica("phone", of: "alice")
        try await phone.service.createPost(id: "mine", authorID: "alice", body: "not pushed yet")
        try await world.source.deletePost(postID: "p2", by: nil)
        try await world.source.like(userID: "bob", postID: "p1")
        _ = try await world.source.pruneEvents(through: try await world.source.status().lastSeq)
        let report = try await phone.sync.sync()
        #expect(report.resynced && report.pendingChanges == 0)
        #expect(try await phone.service.feedPage(viewerID: "alice").rows.map(\.post.id).sorted() == ["mine", "p1"])
        try world.expectAgrees(phone)
    }

    @Test(arguments: TestBackend.allCases)
    func aPagedResyncDropsDeletedPostsOfOneMillisecondAcrossPageBoundaries(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        // Twelve posts of one millisecond: every snapshot page boundary falls inside it.
        let stopped = try withDependencies {
            $0.date = .constant(Date(timeIntervalSince1970: 1_700_000_000))
        } operation: {
            try FeedService(location: world.location)
        }
        for i in 1...12 { try await stopped.createPost(id: "same\(i)", authorID: i.isMultiple(of: 2) ? "bob" : "carol", body: "tick") }
        stopped.close()
        let phone = try FeedService(location: dir.file("phone.sqlite"))
        defer { phone.close() }
        try phone.makeReplica(of: world.location, userID: "alice", clientID: "paged")
        let sync = try ReplicaSync(replica: phone, transport: world.transport(for: "alice"), pullSize: 3)
        _ = try await sync.sync()
        let replica = ReplicaWorld.Replica(service: phone, sync: sync, clientID: "paged")
        try world.expectAgrees(replica)
        for i in [1, 3, 4, 8, 12] { try await world.source.deletePost(postID: "same\(i)", by: nil) }
        try await world.source.deletePost(postID: "p2", by: nil)
        _ = try await world.source.pruneEvents(through: try await world.source.status().lastSeq)
        let report = try await sync.sync()
        #expect(report.resynced)
        #expect(try await phone.feedPage(viewerID: "alice", limit: 100).rows.count == 8)
        try world.expectAgrees(replica)
    }

    @Test(arguments: TestBackend.allCases)
    func aQueuedLikeOnADeletedPostIsRejectedWithoutBlockingTheQueue(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        let phone = try await world.replica("phone", of: "alice")
        // Offline: likes of A (p1) and B (p2), shown at once.
        try await phone.service.like(userID: "alice", postID: "p1")
        try await phone.service.like(userID: "alice", postID: "p2")
        try await phone.service.unlike(userID: "alice", postID: "p2")
        try await phone.service.like(userID: "alice", postID: "p2")
        #expect(try await phone.service.post(id: "p2", viewerID: "alice").post.likeCount == 1)
        try await world.source.like(userID: "bob", postID: "p2")
        try await world.source.deletePost(postID: "p2", by: "carol")
        let report = try await phone.sync.sync()
        #expect(report.pushed == 4 && report.rejected == 3 && report.pendingChanges == 0)
        #expect(try await world.source.likedPostIDs(userID: "alice") == ["p1"])
        #expect(try await world.source.post(id: "p1", viewerID: nil).post.likeCount == 1)
        let status = try #require(try await phone.service.replicaStatus())
        #expect(status.pendingChanges == 0 && status.rejectedChanges == 3)
        #expect(status.recentRejections.map(\.reason) == Array(repeating: #"no post "p2""#, count: 3))
        let rows = try await phone.service.feedPage(viewerID: "alice").rows
        #expect(rows.map(\.post.id) == ["p1"] && rows[0].liked && rows[0].post.likeCount == 1)
        try world.expectAgrees(phone)
        // Nothing is stuck: the next local write syncs as usual.
        try await phone.service.unlike(userID: "alice", postID: "p1")
        let next = try await phone.sync.sync()
        #expect(next.pushed == 1 && next.rejected == 0 && next.pendingChanges == 0)
        #expect(try await world.source.likedPostIDs(userID: "alice").isEmpty)
        try world.expectAgrees(phone)
    }

    @Test(arguments: TestBackend.allCases)
    func anErasedUsersReplicaIsToldSoAndKeepsItsData(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        try await world.source.like(userID: "alice", postID: "p1")
        let phone = try await world.replica("phone", of: "alice")
        try await phone.service.like(userID: "alice", postID: "p2")
        let before = try await ReplicaState(phone)
        try await world.source.deleteUser(userID: "alice")
        let location = dir.file("phone.sqlite")
        let expected = SyncError.accountNotFound(userID: "alice", replica: location)
        await #expect(throws: expected) { try await phone.sync.sync() }
        #expect(expected.description.contains(#"no account "alice": it was erased, or never existed"#))
        #expect(expected.description.contains(#"remove "\#(location)" to delete it"#))
        #expect(!expected.isTransient)
        // Following stops at once with the same error instead of retrying.
        await #expect(throws: expected) { try await phone.sync.follow() }
        #expect(try await ReplicaState(phone) == before, "the replica's data is left as it was")
        #expect(try await phone.service.replicaStatus()?.lastError == nil, "nothing is written, not even the error")
        // The source answers a push as a pull: nothing written for the erased id.
        let seq = try await world.source.status().lastSeq
        await #expect(throws: SyncError.accountNotFound(userID: "alice", replica: nil)) {
            _ = try await world.transport(for: "alice").push(
                PushRequest(clientID: phone.clientID, mutations: [SyncMutation(number: 1, kind: .like, postID: "p2")]))
        }
        #expect(try await world.source.status().lastSeq == seq)
        #expect(try world.source.firstColumn("SELECT count(*) FROM sync_clients") == [.integer(0)])
        let answer = await SyncEndpoint(service: world.source).respond(
            to: .pull, body: Data(#"{"version":3,"clientID":"c9","bulkGeneration":0}"#.utf8), userID: "alice")
        #expect(answer.status == 403)
        #expect(try JSONDecoder().decode([String: String].self, from: answer.body)["code"] == "accountNotFound")
    }

    @Test(arguments: TestBackend.allCases)
    func anotherUsersReplicaLosesTheErasedUserAndSeesCorrectedCounts(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        try await world.source.createPost(id: "a1", authorID: "alice", body: "by alice")
        for post in ["p1", "p2", "a1"] { try await world.source.like(userID: "alice", postID: post) }
        try await world.source.like(userID: "bob", postID: "a1")
        try await world.source.like(userID: "bob", postID: "p1")
        let laptop = try await world.replica("laptop", of: "bob")
        #expect(try await laptop.service.post(id: "p1", viewerID: "bob").post.likeCount == 2)
        // Another replica of bob pulls one change a step: the erasure's count changes arrive before its snapshot.
        let tablet = try FeedService(location: dir.file("tablet.sqlite"))
        defer { tablet.close() }
        try tablet.makeReplica(of: world.location, userID: "bob", clientID: "tablet")
        let stepwise = try ReplicaSync(replica: tablet, transport: world.transport(for: "bob"), pullSize: 1)
        _ = try await stepwise.sync()
        let counted = try await tablet.lastSeqOfItsOwnLog()
        try await world.source.deleteUser(userID: "alice")
        _ = try await stepwise.sync()
        let seen = try await tablet.events(after: counted)
        #expect(seen.contains { $0.kind == .likeCountChanged && $0.postID == "p1" && $0.likeCount == 1 && $0.userID.isEmpty })
        #expect(seen.contains { $0.kind == .postDeleted && $0.postID == "a1" } && seen.last?.kind == .userDeleted)
        try world.expectAgrees(ReplicaWorld.Replica(service: tablet, sync: stepwise, clientID: "tablet"))
        #expect(try await tablet.users().map(\.id) == ["bob", "carol"])
        let report = try await laptop.sync.sync()
        #expect(report.resynced, "an erasure names nobody in the log: the replica gets a snapshot")
        let rows = try await laptop.service.feedPage(viewerID: "bob").rows
        #expect(rows.map(\.post.id).sorted() == ["p1", "p2"])
        #expect(rows.map(\.post.likeCount).sorted() == [0, 1])
        #expect(try await laptop.service.likedPostIDs(userID: "bob") == ["p1"])
        #expect(try await laptop.service.users().map(\.id) == ["bob", "carol"])
        #expect(try await laptop.service.events(after: 0).allSatisfy { $0.userID != "alice" })
        #expect(try laptop.service.firstColumn("SELECT count(*) FROM deleted_posts WHERE id = 'a1'") == [.integer(1)])
        try world.expectAgrees(laptop)
        // Caught up, the next sync is an ordinary one.
        let next = try await laptop.sync.sync()
        #expect(!next.resynced && next.pulled == 0)
    }

    @Test(arguments: TestBackend.allCases)
    func aReplicaBehindAcrossAnErasureAndAPostDeletionEndsEqualToTheSource(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        try await world.source.createPost(id: "a1", authorID: "alice", body: "by alice")
        let phone = try await world.replica("phone", of: "carol")
        // While the phone is offline: its own writes, and the source's likes, a post deletion and an erasure.
        try await phone.service.like(userID: "carol", postID: "a1")
        try await phone.service.like(userID: "carol", postID: "p1")
        try await phone.service.createPost(id: "c1", authorID: "carol", body: "offline")
        for post in ["p1", "p2"] { try await world.source.like(userID: "alice", postID: post) }
        try await world.source.like(userID: "bob", postID: "a1")
        try await world.source.like(userID: "bob", postID: "p2")
        try await world.source.deletePost(postID: "p2", by: "carol")
        try await world.source.deleteUser(userID: "alice")
        try await world.source.createPost(id: "b2", authorID: "bob", body: "after the erasure")
        try await world.source.like(userID: "bob", postID: "p1")
        let report = try await phone.sync.sync()
        #expect(report.pushed == 3 && report.rejected == 1 && report.pendingChanges == 0)
        #expect(try await world.source.likedPostIDs(userID: "carol") == ["p1"])
        #expect(try await phone.service.feedPage(viewerID: "carol").rows.map(\.post.id).sorted() == ["b2", "c1", "p1"])
        #expect(try await phone.service.users().map(\.id) == ["bob", "carol"])
        try world.expectAgrees(phone)
    }

    @Test(arguments: TestBackend.allCases)
    func aPushedLikeRacingThePostsDeletionIsAppliedBeforeItOrRejectedNeverAnError(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        let transport = world.transport(for: "alice")
        defer { transport.close() }
        var rejected = 0
        for round in 1...20 {
            let postID = "race\(round)"
            try await world.source.createPost(id: postID, authorID: "bob", body: "soon gone")
            let push = PushRequest(
                clientID: "racer",
                mutations: [
                    SyncMutation(number: Int64(2 * round - 1), kind: .like, postID: "p1"),
                    SyncMutation(number: Int64(2 * round), kind: round.isMultiple(of: 2) ? .like : .unlike, postID: postID),
                ])
            async let answer = transport.push(push)
            try await world.source.deletePost(postID: postID, by: nil)
            let response = try await answer
            #expect(response.lastMutation == Int64(2 * round))
            #expect(response.rejected.allSatisfy { $0.number == Int64(2 * round) && $0.reason == "no post \"\(postID)\"" })
            rejected += response.rejected.count
        }
        #expect(try await world.source.likedPostIDs(userID: "alice") == ["p1"])
        #expect(try await world.source.check().isEmpty)
        #expect(rejected <= 20)
    }
}

extension FeedService {
    /// The last seq of the service's own log.
    fileprivate func lastSeqOfItsOwnLog() async throws -> Int64 { try await status().lastSeq }
}

/// What a replica holds, to compare before and after a sync that must write nothing.
private struct ReplicaState: Equatable {
    let feed: [String]
    let pending: Int
    let lastSyncedSeq: Int64
    let events: Int

    init(_ replica: ReplicaWorld.Replica) async throws {
        let user = try #require(try await replica.service.replicaStatus()).user
        feed = try await replica.service.feedPage(viewerID: user).rows.map { "\($0.post.id) \($0.post.likeCount) \($0.liked)" }
        let status = try #require(try await replica.service.replicaStatus())
        pending = status.pendingChanges
        lastSyncedSeq = status.lastSyncedSeq
        events = try await replica.service.events(after: 0).count
    }
}
