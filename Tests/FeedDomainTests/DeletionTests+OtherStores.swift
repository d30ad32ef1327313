@testable import FeedDomain
import FeedCore
import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// A deletion by another store — another process, or another service on the same database — reaches this one's like
/// commands at once, even where a new row took the deleted one's integer key.
extension DeletionTests {
    @Test(arguments: TestBackend.allCases)
    func aLikeAfterAnotherStoresDeletionNeverReachesANewRowWithTheSameKey(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let first = try makeService(at: location)
        defer { first.close() }
        let second = try FeedService(location: location)
        defer { second.close() }
        // The first service learns the keys of the newest post and the newest user.
        try first.like(userID: "user2", postID: "post3")
        try first.like(userID: "user3", postID: "post1")
        #expect(try second.deletePost(postID: "post3", by: nil).deleted)
        #expect(try second.deleteUser(userID: "user3").deleted)
        // On SQLite the new rows take the highest keys again: the deleted ones.
        try second.createUser(id: "user4")
        try second.createPost(id: "post4", authorID: "user1", body: "new")

        #expect(throws: FeedError.postNotFound("post3")) { try first.like(userID: "user2", postID: "post3") }
        #expect(throws: FeedError.userNotFound("user3")) { try first.like(userID: "user3", postID: "post2") }
        #expect(try first.post(id: "post4", viewerID: nil).post.likeCount == 0)
        #expect(try first.likedPostIDs(userID: "user4").isEmpty)
        #expect(try first.like(userID: "user4", postID: "post4").likeCount == 1)
        #expect(try first.check().map(\.description) == [])
    }

    @Test(arguments: TestBackend.allCases)
    func anErasedViewersPageNeverShowsAnotherUsersLikes(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let first = try makeService(at: location)
        defer { first.close() }
        let second = try FeedService(location: location)
        defer { second.close() }
        #expect(try first.feedPage(viewerID: "user3").rows.allSatisfy { !$0.liked })

        try second.deleteUser(userID: "user3")
        try second.createUser(id: "user4")
        try second.like(userID: "user4", postID: "post1")

        // SQLite may have given user3's key to user4: the page must not show user4's like as user3's.
        do {
            let page = try first.feedPage(viewerID: "user3")
            #expect(backend == .postgresql, "SQLite looks the viewer up each time")
            #expect(page.rows.allSatisfy { !$0.liked })
        } catch {
            #expect(error == .userNotFound("user3"))
        }
        #expect(throws: FeedError.userNotFound("user3")) { try second.feedPage(viewerID: "user3") }
        #expect(try first.feedPage(viewerID: "user4").rows.first { $0.post.id == "post1" }?.liked == true)
    }
}
