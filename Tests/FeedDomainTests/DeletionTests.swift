@testable import FeedDomain
import FeedCore
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Deleting a post and erasing a user, on both backends: one transaction and one event each, idempotent, counts
/// equal to likes, and no event naming an erased user.
// Blocks: database calls on the test's thread.
@Suite(.ownThreads) struct DeletionTests {
    @Test(arguments: TestBackend.allCases)
    func aDeletedPostTakesItsLikesAndIsGoneForGood(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.like(userID: "user2", postID: "post1")
        try service.like(userID: "user3", postID: "post1")
        try service.like(userID: "user2", postID: "post2")
        let before = try service.events().count

        let deletion = try service.deletePost(postID: "post1", by: "user1")
        #expect(deletion.deleted)
        let events = try service.events(after: Int64(before))
        #expect(events.map(\.kind) == [.postDeleted])
        #expect(events.first?.seq == deletion.seq)
        #expect(events.first?.userID == "user1")
        #expect(events.first?.postID == "post1")
        #expect(events.first?.likeCount == nil)

        #expect(try service.feedPage(viewerID: "user2").rows.map(\.post.id) == ["post3", "post2"])
        #expect(try service.likedPostIDs(userID: "user2") == ["post2"])
        #expect(try service.likedPostIDs(userID: "user3").isEmpty)
        #expect(try service.check().isEmpty)

        // Again: nothing changes, and it says so.
        #expect(try service.deletePost(postID: "post1", by: "user1") == PostDeletion(postID: "post1", deleted: false, seq: nil))
        #expect(try service.events().count == before + 1)
        #expect(throws: FeedError.postNotFound("post1")) { try service.like(userID: "user2", postID: "post1") }
        #expect(throws: FeedError.postNotFound("post1")) { try service.post(id: "post1", viewerID: nil) }
        #expect(throws: FeedError.postAlreadyExists("post1")) { try service.createPost(id: "post1", authorID: "user2", body: "again") }
        #expect(throws: FeedError.postNotFound("nope")) { try service.deletePost(postID: "nope", by: nil) }
        #expect(try service.check().isEmpty)
    }

    @Test(arguments: TestBackend.allCases)
    func onlyItsAuthorOrTheOperatorDeletesAPost(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.like(userID: "user2", postID: "post2")
        let before = try service.events().count
        #expect(throws: FeedError.forbidden(userID: "user2", postID: "post2")) { try service.deletePost(postID: "post2", by: "user2") }
        #expect(FeedError.forbidden(userID: "user2", postID: "post2").category == .forbidden)
        #expect(try service.events().count == before)
        #expect(try service.post(id: "post2", viewerID: "user2").post.likeCount == 1)
        #expect(try service.deletePost(postID: "post2", by: nil).deleted)
        #expect(try service.check().isEmpty)
    }

    @Test(arguments: TestBackend.allCases)
    func anErasedUserLeavesNoTraceAndTheLogKeepsItsShape(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.createPost(id: "mine", authorID: "user2", body: "by user2")
        try service.like(userID: "user3", postID: "mine")
        try service.like(userID: "user2", postID: "post1")
        try service.like(userID: "user2", postID: "post2")
        try service.like(userID: "user3", postID: "post2")
        try service.unlike(userID: "user2", postID: "post2")
        try service.like(userID: "user2", postID: "post2")
        let token = try service.issueToken(userID: "user2", label: "phone")
        #expect(try service.authenticate(token: token.token) == "user2")
        let history = try service.events()

        let erasure = try service.deleteUser(userID: "user2")
        #expect(erasure.deleted)
        #expect(erasure.deletedPosts == 1)
        #expect(erasure.removedLikes == 2)

        let log = try service.events()
        // Every earlier event keeps its seq and kind; none names the user any more.
        #expect(log.prefix(history.count).map(\.seq) == history.map(\.seq))
        #expect(log.prefix(history.count).map(\.kind) == history.map(\.kind))
        #expect(log.prefix(history.count).map(\.postID) == history.map(\.postID))
        #expect(!log.contains { $0.userID == "user2" })
        let appended = log.dropFirst(history.count)
        #expect(appended.map(\.kind) == [.postDeleted, .unliked, .unliked, .userDeleted])
        #expect(appended.allSatisfy { $0.userID.isEmpty })
        #expect(appended.last?.seq == erasure.seq)
        #expect(appended.filter { $0.kind == .unliked }.map(\.postID) == ["post1", "post2"])
        #expect(appended.filter { $0.kind == .unliked }.map(\.likeCount) == [0, 1])

        #expect(try service.post(id: "post1", viewerID: nil).post.likeCount == 0)
        #expect(try service.post(id: "post2", viewerID: "user3").post.likeCount == 1)
        #expect(try service.authenticate(token: token.token) == nil)
        #expect(try service.tokens().isEmpty)
        #expect(!(try service.users().contains { $0.id == "user2" }))
        #expect(throws: FeedError.userNotFound("user2")) { try service.feedPage(viewerID: "user2") }
        #expect(throws: FeedError.postNotFound("mine")) { try service.like(userID: "user3", postID: "mine") }
        #expect(try service.likedPostIDs(userID: "user3") == ["post2"])
        #expect(try service.check().isEmpty)

        // Again, or for a user that never existed: nothing written.
        let count = log.count
        #expect(try !service.deleteUser(userID: "user2").deleted)
        #expect(try !service.deleteUser(userID: "nobody").deleted)
        #expect(try service.events().count == count)
        // The id is free again: a new user of that name starts with nothing.
        try service.createUser(id: "user2")
        #expect(try service.likedPostIDs(userID: "user2").isEmpty)
        #expect(try service.check().isEmpty)
    }

    @Test(arguments: TestBackend.allCases)
    func anOpenFeedDropsADeletedPost(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try withDependencies {
            $0.feedClient = .live(service)
        } operation: { () throws in
            let feed = FeedListProjection(viewerID: "user2")
            feed.send(.refresh)
            try service.like(userID: "user2", postID: "post1")
            #expect(feed(\.posts).map(\.id) == ["post3", "post2", "post1"])
            let deletion = try service.deletePost(postID: "post1", by: "user1")
            #expect(service.waitForDelivery(through: try #require(deletion.seq)))
            #expect(feed(\.posts).map(\.id) == ["post3", "post2"])
            #expect(!feed(\.likedPostIDs).contains("post1"))
        }
    }

    @Test(arguments: TestBackend.allCases)
    func theAsyncFormsDeleteAndEraseToo(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        #expect(try await service.deletePost(postID: "post3", by: "user1").deleted)
        #expect(try await !service.deletePost(postID: "post3", by: "user1").deleted)
        #expect(try await service.deleteUser(userID: "user1").deletedPosts == 2)
        #expect(try await service.feedPage(viewerID: nil).rows.isEmpty)
        #expect(try await service.check().isEmpty)
    }
}
