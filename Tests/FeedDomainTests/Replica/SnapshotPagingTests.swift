import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// A snapshot travels in pages of the pull size, like every other pull step, and the replica ends equal to the
/// source — also when the source changes between pages.
@Suite struct SnapshotPagingTests {
    /// A transport that keeps every pull's answer and may run something on the source after each snapshot page.
    final class RecordingTransport: SyncTransport, Sendable {
        let inner: any SyncTransport
        let answers = LockedValue<[PullResponse]>([])
        let afterSnapshotPage: @Sendable (Int) async throws -> Void

        init(_ inner: any SyncTransport, afterSnapshotPage: @escaping @Sendable (Int) async throws -> Void = { _ in }) {
            self.inner = inner
            self.afterSnapshotPage = afterSnapshotPage
        }

        func push(_ request: PushRequest) async throws(SyncError) -> PushResponse {
            try await inner.push(request)
        }

        func pull(_ request: PullRequest) async throws(SyncError) -> PullResponse {
            let answer = try await inner.pull(request)
            let pages = answers.withLock { answers in
                answers.append(answer)
                return answers.filter { $0.snapshot != nil }.count
            }
            if answer.snapshot != nil { try? await afterSnapshotPage(pages) }
            return answer
        }

        func waitForChanges(after seq: Int64, timeout: Duration) async throws(SyncError) {
            try await inner.waitForChanges(after: seq, timeout: timeout)
        }
    }

    /// A source with more users and posts than one page holds, and likes of the replica's user and of others.
    static func populate(_ world: ReplicaWorld) async throws {
        try await world.source.createUser(id: "dee", name: "Dee")
        for i in 3...12 { try await world.source.createPost(id: "p\(i)", authorID: i.isMultiple(of: 2) ? "dee" : "bob", body: "post \(i)") }
        for post in ["p1", "p4", "p9"] { try await world.source.like(userID: "alice", postID: post) }
        for post in ["p1", "p2", "p9", "p12"] { try await world.source.like(userID: "bob", postID: post) }
    }

    static func replica(of world: ReplicaWorld, _ transport: RecordingTransport, pullSize: Int) throws -> ReplicaWorld.Replica {
        let service = try FeedService(location: world.dir.file("phone.sqlite"))
        try service.makeReplica(of: world.location, userID: "alice", clientID: "c-phone")
        let sync = try ReplicaSync(
            replica: service, transport: transport,
            retry: .init(attempts: 4, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(10)),
            pullSize: pullSize)
        return ReplicaWorld.Replica(service: service, sync: sync, clientID: "c-phone")
    }

    @Test(arguments: TestBackend.allCases)
    func aSnapshotArrivesInPagesOfThePullSize(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        try await Self.populate(world)
        let transport = RecordingTransport(world.transport(for: "alice"))
        let phone = try Self.replica(of: world, transport, pullSize: 3)
        defer { phone.service.close() }
        let report = try await phone.sync.sync()
        let pages = transport.answers.withLock { $0 }.compactMap(\.snapshot)
        // 4 users, then 12 posts, 3 rows a page: users 3 + 1, then posts 3, 3, 3, 3, and an empty last page.
        #expect(pages.map { $0.users.count + $0.posts.count }.allSatisfy { $0 <= 3 }, "\(pages)")
        #expect(pages.count >= 5, "\(pages.count) pages")
        #expect(pages.flatMap(\.users).map(\.id) == ["alice", "bob", "carol", "dee"])
        #expect(pages.flatMap(\.posts).map(\.id) == ["p1", "p2"] + (3...12).map { "p\($0)" }, "oldest first, each once")
        let answers = transport.answers.withLock { $0 }.filter { $0.snapshot != nil }
        #expect(answers.dropLast().allSatisfy { $0.nextSnapshot != nil && $0.hasMore } && answers.last?.nextSnapshot == nil)
        #expect(report.lastSyncedSeq == (try await world.source.status().lastSeq))
        try world.expectAgrees(phone)
        #expect(try await phone.service.users().map(\.name) == ["", "", "", "Dee"])
    }

    @Test(arguments: TestBackend.allCases)
    func changesBetweenPagesStillLeaveTheReplicaEqualToTheSource(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        try await Self.populate(world)
        let source = world.source
        let transport = RecordingTransport(world.transport(for: "alice")) { page in
            switch page {
            case 1:
                // A user and a post by them after the snapshot began: the post may arrive before its author's name.
                try await source.createUser(id: "eve", name: "Eve")
                try await source.createPost(id: "p13", authorID: "eve", body: "late")
            case 3:
                try await source.like(userID: "carol", postID: "p1")
                try await source.unlike(userID: "alice", postID: "p1")
                try await source.like(userID: "alice", postID: "p13")
            default:
                break
            }
        }
        let phone = try Self.replica(of: world, transport, pullSize: 3)
        defer { phone.service.close() }
        _ = try await phone.sync.sync()
        try world.expectAgrees(phone)
        #expect(try await phone.service.users().map(\.id) == (try await source.users().map(\.id)))
        #expect(try await phone.service.users().first { $0.id == "eve" }?.name == "Eve")
    }

    @Test(arguments: TestBackend.allCases)
    func aResyncAfterPruningIsPagedToo(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        let transport = RecordingTransport(world.transport(for: "alice"))
        let phone = try Self.replica(of: world, transport, pullSize: 3)
        defer { phone.service.close() }
        _ = try await phone.sync.sync()
        try await Self.populate(world)
        _ = try await world.source.pruneEvents(through: try await world.source.status().lastSeq)
        let before = transport.answers.withLock { $0.count }
        let report = try await phone.sync.sync()
        let pages = transport.answers.withLock { Array($0.dropFirst(before)) }.filter { $0.snapshot != nil }
        #expect(report.resynced && pages.count >= 5 && pages.allSatisfy(\.resync))
        try world.expectAgrees(phone)
    }
}
