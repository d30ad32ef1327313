import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// A replica mirrors one user's view of a source, works offline, and syncs each local write exactly once.
@Suite struct ReplicaTests {
    @Test(arguments: TestBackend.allCases)
    func aReplicaMirrorsItsUsersViewAndOnlyCountsOfOthers(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        try await world.source.like(userID: "bob", postID: "p1")
        try await world.source.like(userID: "alice", postID: "p2")
        let phone = try await world.replica("phone", of: "alice")
        #expect(try await phone.service.feedPage(viewerID: "alice").rows.map(\.liked) == [true, false])
        #expect(try await phone.service.feedPage(viewerID: "alice").rows.map(\.post.likeCount) == [1, 1])
        #expect(try await phone.service.likedPostIDs(userID: "bob").isEmpty, "another user's likes never reach a replica")
        try await world.source.like(userID: "bob", postID: "p2")
        try await world.source.unlike(userID: "bob", postID: "p1")
        let report = try await phone.sync.sync()
        #expect(report.pulled == 2)
        let events = try await phone.service.events(after: 0).suffix(2)
        #expect(events.map(\.kind) == [.likeCountChanged, .likeCountChanged])
        #expect(events.allSatisfy { $0.userID.isEmpty })
        try world.expectAgrees(phone)
    }

    @Test(arguments: TestBackend.allCases)
    func offlineWritesShowAtOnceAndSyncOnce(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        let phone = try await world.replica("phone", of: "alice")
        let liked = try await phone.service.toggle(userID: "alice", postID: "p1")
        #expect(liked.liked && liked.likeCount == 1)
        let post = try await phone.service.createPost(id: "offline1", authorID: "alice", body: "written in a tunnel")
        try await phone.service.like(userID: "alice", postID: post.id)
        try await phone.service.toggle(userID: "alice", postID: "p2")
        try await phone.service.toggle(userID: "alice", postID: "p2")
        #expect(try await phone.service.replicaStatus()?.pendingChanges == 5)
        #expect(try await world.source.likedPostIDs(userID: "alice").isEmpty, "nothing reached the source yet")
        let report = try await phone.sync.sync()
        #expect(report.pushed == 5 && report.rejected == 0 && report.pendingChanges == 0)
        #expect(try await world.source.likedPostIDs(userID: "alice") == ["p1", "offline1"])
        #expect(try await world.source.post(id: "offline1", viewerID: nil).post.body == "written in a tunnel")
        try world.expectAgrees(phone)
        // The same push delivered again changes nothing.
        let again = try await world.transport(for: "alice").push(
            PushRequest(clientID: phone.clientID, mutations: [SyncMutation(number: 1, kind: .unlike, postID: "p1")]))
        #expect(again.lastMutation == 5)
        #expect(try await world.source.likedPostIDs(userID: "alice") == ["p1", "offline1"])
    }

    @Test(arguments: TestBackend.allCases)
    func anInvalidMutationIsRejectedReportedAndNeverBlocksTheQueue(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        let transport = world.transport(for: "alice")
        let response = try await transport.push(
            PushRequest(
                clientID: "c1",
                mutations: [
                    SyncMutation(number: 1, kind: .like, postID: "nope"),
                    SyncMutation(number: 2, kind: .like, postID: "p1"),
                    SyncMutation(number: 3, kind: .createPost, postID: "p1", body: "taken"),
                    SyncMutation(number: 4, kind: .createPost, postID: "bad id!", body: "x"),
                ]))
        #expect(response.lastMutation == 4)
        #expect(response.rejected.map(\.number) == [1, 3, 4])
        #expect(response.rejected[0].reason == #"no post "nope""#)
        #expect(try await world.source.likedPostIDs(userID: "alice") == ["p1"])
        // Asked again (the answer was lost), the refusals are reported again and nothing applies twice.
        let again = try await transport.push(PushRequest(clientID: "c1", mutations: [SyncMutation(number: 1, kind: .like, postID: "nope")]))
        #expect(again.rejected.map(\.number) == [1])
        #expect(try await world.source.events(after: 0).count == world.baselineEvents + 1)
    }

    @Test(arguments: TestBackend.allCases)
    func twoDevicesOfOneUserConvergeOnTheLaterPush(on backend: TestBackend) async throws {
        for phoneFirst in [true, false] {
            let dir = TemporaryDirectory()
            guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
            defer { world.close() }
            try await world.source.like(userID: "alice", postID: "p1")
            let phone = try await world.replica("phone", of: "alice")
            let laptop = try await world.replica("laptop", of: "alice")
            try await phone.service.like(userID: "alice", postID: "p2")
            try await laptop.service.unlike(userID: "alice", postID: "p2")
            try await laptop.service.unlike(userID: "alice", postID: "p1")
            try await phone.service.like(userID: "alice", postID: "p1")
            let (first, second) = phoneFirst ? (phone, laptop) : (laptop, phone)
            for _ in 0..<2 {
                _ = try await first.sync.sync()
                _ = try await second.sync.sync()
            }
            let expected: Set<String> = phoneFirst ? [] : ["p1", "p2"]
            #expect(try await world.source.likedPostIDs(userID: "alice") == expected, "the later push wins")
            try world.expectAgrees(phone)
            try world.expectAgrees(laptop)
        }
    }

    @Test(arguments: TestBackend.allCases)
    func aCursorBehindPrunedHistoryGetsASnapshotNotAGap(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        let phone = try await world.replica("phone", of: "alice")
        try await phone.service.like(userID: "alice", postID: "p2")
        for user in ["bob", "carol"] { try await world.source.like(userID: user, postID: "p1") }
        try await world.source.createPost(id: "p3", authorID: "bob", body: "third")
        try await world.source.like(userID: "bob", postID: "p3")
        _ = try await world.source.pruneEvents(through: try await world.source.status().lastSeq)
        let report = try await phone.sync.sync()
        #expect(report.resynced)
        #expect(report.pendingChanges == 0)
        try world.expectAgrees(phone)
    }
}

/// A source with users alice, bob, carol and posts p1, p2, and replicas of it.
struct ReplicaWorld: Sendable {
    let dir: TemporaryDirectory
    let location: String
    let source: FeedService
    let baselineEvents: Int

    struct Replica: Sendable {
        let service: FeedService
        let sync: ReplicaSync
        let clientID: String
    }

    init?(in dir: TemporaryDirectory, on backend: TestBackend) throws {
        guard let location = try backend.makeLocation(in: dir, "source") else { return nil }
        self.dir = dir
        self.location = location
        var options = FeedOpenOptions()
        options.busyTimeout = .seconds(60)
        source = try FeedService(location: location, options: options)
        for user in ["alice", "bob", "carol"] { try source.createUser(id: user) }
        try source.createPost(id: "p1", authorID: "bob", body: "first")
        try source.createPost(id: "p2", authorID: "carol", body: "second")
        baselineEvents = try source.events(after: 0).count
    }

    /// A transport to the source as `user`. It opens its own service on the source, one more writer beside the
    /// test's: a long busy timeout keeps a slow run (ThreadSanitizer) from failing on the file's write lock.
    func transport(for user: String) -> InProcessSyncTransport {
        var options = FeedOpenOptions()
        options.busyTimeout = .seconds(60)
        return InProcessSyncTransport(location: location, userID: user, options: options)
    }

    /// A new replica of `user`, synced once (through `transport`, or straight to the source).
    func replica(_ name: String, of user: String, transport: (any SyncTransport)? = nil) async throws -> Replica {
        let service = try FeedService(location: dir.file(name + ".sqlite"))
        let clientID = UUID().uuidString.lowercased()
        try service.makeReplica(of: location, userID: user, clientID: clientID)
        let sync = try ReplicaSync(
            replica: service, transport: transport ?? self.transport(for: user),
            retry: .init(attempts: 4, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(10)))
        _ = try await sync.sync()
        return Replica(service: service, sync: sync, clientID: clientID)
    }

    /// The replica shows exactly what the source shows its user.
    func expectAgrees(_ replica: Replica, sourceLocation: SourceLocation = #_sourceLocation) throws {
        guard let user = try replica.service.replicaStatus()?.user else {
            Issue.record("not a replica", sourceLocation: sourceLocation)
            return
        }
        // Newest first; a post the replica created keeps its local place among posts of the same millisecond.
        func rows(_ service: FeedService) throws -> [String] {
            try service.feedPage(viewerID: user, limit: 1000).rows
                .map {
                    "\(Int64($0.post.createdAt.timeIntervalSince1970 * 1000)) \($0.post.id) ❤️\($0.post.likeCount)\($0.liked ? " liked" : "")"
                }
                .sorted(by: >)
        }
        let mine = try rows(replica.service)
        let theirs = try rows(source)
        let differences = zip(mine, theirs).filter { $0 != $1 }.prefix(5).map { "replica \($0) / source \($1)" }
        #expect(
            mine.count == theirs.count && differences.isEmpty, "\(mine.count) vs \(theirs.count) posts; \(differences)",
            sourceLocation: sourceLocation)
        #expect(try replica.service.check().isEmpty, sourceLocation: sourceLocation)
    }

    func close() {
        source.close()
    }
}
