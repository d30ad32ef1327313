@testable import FeedDomain
import FeedCore
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// The features' own storage protocols, on both backends: API tokens, the source's side of replica sync,
/// whole-database maintenance, statements of yours — and replica tables, which only SQLite has.
// Blocks: database calls on the test's thread.
@Suite(.ownThreads) struct FeatureStoreTests {
    static let now = Date(timeIntervalSince1970: 1_700_000_100)
    static let hash1 = String(repeating: "a1", count: 32)
    static let hash2 = String(repeating: "b2", count: 32)

    static func write<T>(_ service: FeedService, _ body: (any FeedTransaction) throws -> T) throws -> T {
        try service.backend.write(body, afterCommit: { _ in })
    }

    @Test(arguments: TestBackend.allCases)
    func tokensAreStoredListedFoundAndRevoked(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        #expect(
            try Self.write(service) {
                try $0.tokens.insertToken(id: "0123456789ab", userID: "user2", hash: Self.hash1, label: "a", at: Self.now)
            })
        #expect(
            try !Self.write(service) {
                try $0.tokens.insertToken(id: "0123456789ab", userID: "user3", hash: Self.hash2, label: "", at: Self.now)
            })
        let listed = try service.backend.read { try $0.tokens.tokens() }
        #expect(listed == [TokenRecord(id: "0123456789ab", userID: "user2", label: "a", createdAt: Self.now, revokedAt: nil)])
        #expect(try service.backend.readOnce { try $0.tokens.tokenUser(hash: Self.hash1, id: "0123456789ab") } == "user2")
        #expect(try service.backend.readOnce { try $0.tokens.tokenUser(hash: Self.hash1, id: "ffffffffffff") } == nil)
        #expect(try Self.write(service) { try $0.tokens.revokeToken(id: "0123456789ab", at: Self.now) })
        #expect(try !Self.write(service) { try $0.tokens.revokeToken(id: "0123456789ab", at: Self.now) })
        #expect(try service.backend.readOnce { try $0.tokens.tokenUser(hash: Self.hash1, id: "0123456789ab") } == nil)
        #expect(try service.backend.read { try $0.tokens.tokens() }.first?.revokedAt == Self.now)
    }

    @Test(arguments: TestBackend.allCases)
    func aSyncClientIsClaimedRecordedAndItsRefusalsKept(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        #expect(try service.backend.read { try $0.syncSource.syncClient("c1") } == nil)
        let claimed = try Self.write(service) { try $0.syncSource.claimSyncClient("c1", userID: "user2", at: Self.now) }
        #expect(claimed == SyncClientRecord(userID: "user2", lastMutation: 0, lastMutationSeq: 0))
        try Self.write(service) { tx in
            try tx.syncSource.recordSyncRejections(
                [SyncRejectionRecord(number: 2, reason: "no post"), SyncRejectionRecord(number: 5, reason: "taken")], clientID: "c1",
                at: Self.now)
            try tx.syncSource.recordSyncRejections([SyncRejectionRecord(number: 2, reason: "again")], clientID: "c1", at: Self.now)
            try tx.syncSource.recordSyncHandled(clientID: "c1", through: 5, lastSeq: 6)
        }
        // Another user's push of the same client finds the record of its owner.
        let again = try Self.write(service) { try $0.syncSource.claimSyncClient("c1", userID: "user3", at: Self.now) }
        #expect(again == SyncClientRecord(userID: "user2", lastMutation: 5, lastMutationSeq: 6))
        let refusals = try service.backend.read { try $0.syncSource.syncRejections(clientID: "c1", numbers: 1...4) }
        #expect(refusals == [SyncRejectionRecord(number: 2, reason: "no post")])
        #expect(try service.backend.read { try $0.syncSource.syncRejections(clientID: "c2", numbers: 1...9) }.isEmpty)
    }

    @Test(arguments: TestBackend.allCases)
    func existingPostIDsAnswersForManyIdsAtOnce(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        let asked = (1...250).map { "post\($0)" } + ["post2", "nope"]
        #expect(try service.backend.read { try $0.syncSource.existingPostIDs(asked) } == ["post1", "post2", "post3"])
        #expect(try service.backend.read { try $0.syncSource.existingPostIDs([]) }.isEmpty)
    }

    @Test(arguments: TestBackend.allCases)
    func syncEventsCarryCreatedUsersNamesAndPostsBodies(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.createUser(id: "user4", name: "Dee")
        try service.like(userID: "user2", postID: "post1")
        let events = try service.backend.read { try $0.syncSource.syncEvents(after: 3, limit: 4) }
        #expect(events.map(\.record.seq) == [4, 5, 6, 7])
        #expect(events.map(\.record.kind) == [.postCreated, .postCreated, .postCreated, .userCreated])
        #expect(events.map(\.postBody) == ["body 1", "body 2", "body 3", nil])
        #expect(events.map(\.userName) == [nil, nil, nil, "Dee"])
        let like = try service.backend.read { try $0.syncSource.syncEvents(after: 7, limit: 10) }
        #expect(like.map(\.record.kind) == [.liked] && like[0].userName == nil && like[0].postBody == nil)
    }

    @Test(arguments: TestBackend.allCases)
    func snapshotPagesCoverUsersByIdAndPostsOldestFirst(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.createPost(id: "post4", authorID: "user2", body: "body 4")
        try service.like(userID: "user2", postID: "post2")
        let viewer = try #require(try service.backend.read { try $0.userKey(for: "user2") })
        let users = try service.backend.read { tx in
            [try tx.syncSource.snapshotUsers(after: nil, limit: 2), try tx.syncSource.snapshotUsers(after: "user2", limit: 2)]
        }
        #expect(users.map { $0.map(\.id) } == [["user1", "user2"], ["user3"]])
        var pages: [[FeedRow]] = []
        var cursor: FeedCursor?
        repeat {
            let page = try service.backend.read { try $0.syncSource.snapshotPosts(viewerKey: viewer, after: cursor, limit: 3) }
            pages.append(page)
            cursor = page.last.map { FeedCursor(after: $0.post) }
        } while pages.last?.count == 3
        #expect(pages.map(\.count) == [3, 1])
        let feed = try service.feedPage(viewerID: "user2", limit: 10).rows
        #expect(pages.flatMap { $0 } == feed.reversed(), "the snapshot's order is the feed's, oldest first")
        #expect(pages.flatMap { $0 }.filter(\.liked).map(\.post.id) == ["post2"])
    }

    @Test(arguments: TestBackend.allCases)
    func maintenanceCountsChecksAndPrunes(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.like(userID: "user2", postID: "post1")
        #expect(try service.backend.read { try $0.maintenance.counts() } == FeedCounts(users: 3, posts: 3, likes: 1, events: 7))
        #expect(try service.backend.read { try $0.maintenance.invariantViolations() }.isEmpty)
        #expect(try service.backend.read { try $0.maintenance.lastSeq(before: Date(timeIntervalSince1970: 1_000)) } == nil)
        #expect(try service.backend.read { try $0.maintenance.lastSeq(before: Date.distantFuture) } == 7)
        #expect(try Self.write(service) { try $0.maintenance.pruneEvents(through: 100) } == 6, "the newest event stays")
        #expect(try service.backend.read { try $0.replayBaseline().prunedThrough } == 6)
    }

    @Test(arguments: TestBackend.allCases)
    func userStatementsRunBoundAndOnlyWriteInWrites(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try Self.write(service) { tx in
            try tx.userStatements.execute("CREATE TABLE mine (k TEXT PRIMARY KEY, n BIGINT NOT NULL)")
            #expect(try tx.userStatements.execute("INSERT INTO mine (k, n) VALUES ($1, $2)", [.text("a'b"), .integer(7)]) == 1)
        }
        #expect(
            try service.backend.read { try $0.userStatements.fetch("SELECT k, n FROM mine WHERE n = $1", [.integer(7)]) } == [
                [.text("a'b"), .integer(7)]
            ])
        #expect(throws: StorageError.self) {
            try service.backend.read { try $0.userStatements.execute("DELETE FROM mine WHERE n = $1", [.integer(7)]) }
        }
    }

    @Test(arguments: TestBackend.allCases)
    func replicaTablesExistOnSQLiteOnly(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try FeedService(location: location)
        defer { service.close() }
        let hasReplicas = try service.backend.read { $0.replicaStore != nil }
        #expect(hasReplicas == (backend == .sqlite))
        guard hasReplicas else { return }
        let identity = ReplicaIdentity(source: "postgresql://db/feed", userID: "alice", clientID: "c1")
        try Self.write(service) { tx in
            let store = try #require(tx.replicaStore)
            #expect(try store.replicaIdentity() == nil)
            try store.startReplica(identity)
            #expect(try store.replicaIdentity() == identity)
            _ = try tx.insertUser(id: "alice", name: "", at: Self.now)
            _ = try tx.insertPost(id: "p1", authorID: "alice", body: "hi", at: Self.now)
            try store.nameUser("alice", name: "Alice")
            let key = try #require(try tx.userKey(for: "alice"))
            #expect(try store.enqueueMutation(.like, postID: "p1", body: nil, at: Self.now) == 1)
            #expect(try store.enqueueMutation(.createPost, postID: "p2", body: "b", at: Self.now) == 2)
            try store.keepBase(of: "p1", userKey: key)
            try store.setShownLike(true, userKey: key, postKey: try #require(try tx.post(id: "p1")).sequence, at: Self.now)
            let post = try #require(try store.replicaPost("p1", userKey: key))
            #expect(post.shownLiked && post.base == ReplicaPostState.Base(liked: false, likeCount: 0) && post.intent == true)
            #expect(try store.pendingMutations(after: 0, limit: 10).map(\.kind) == [.like, .createPost])
            #expect(try store.rejectMutations([SyncRejectionRecord(number: 2, reason: "taken")]) == ["p2"])
            #expect(try store.rejectMutations([SyncRejectionRecord(number: 2, reason: "again")]).isEmpty)
            #expect(try store.confirmMutations(through: 2) == ["p1"])
            try store.recordPush(through: 2)
            try store.recordPush(through: 1)
            try store.recordPull(through: 40, check: 12_345, bulkGeneration: 1, at: Self.now)
            try store.recordSyncError("offline")
        }
        let progress = try service.backend.read { try #require($0.replicaStore).replicaProgress(recentRejections: 5) }
        #expect(progress.cursor == ReplicaCursor(syncedSeq: 40, syncedCheck: 12_345, bulkGeneration: 1, pushedThrough: 2))
        #expect(progress.pending == 0 && progress.rejected == 1 && progress.lastError == "offline")
        #expect(progress.recentRejections == [SyncRejectionRecord(number: 2, reason: "taken")])
        #expect(try service.backend.read { try $0.allUsers() }.map(\.name) == ["Alice"])
    }
}
