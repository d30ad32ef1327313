@testable import FeedDomain
import FeedCore
import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// What readers see of a deletion: an open detail screen turns "deleted", and durable subscribers and change streams
/// get `postDeleted` and `userDeleted` once, in log order.
extension DeletionTests {
    @Test(arguments: TestBackend.allCases)
    func anOpenDetailScreenTurnsDeletedAndRefusesLikes(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try withDependencies {
            $0.feedClient = .live(service)
        } operation: { () throws in
            let detail = PostDetailProjection(postID: "post1", viewerID: "user2")
            detail.send(.load)
            detail.send(.like)
            #expect(detail(\.liked))
            #expect(detail(\.likeCount) == 1)
            #expect(!detail(\.isDeleted))

            let deletion = try service.deletePost(postID: "post1", by: "user1")
            #expect(service.waitForDelivery(through: try #require(deletion.seq)))
            #expect(detail(\.isDeleted))
            #expect(!detail(\.liked))
            #expect(detail(\.likeCount) == 0)
            #expect(detail(\.lastAppliedSeq) == deletion.seq)

            let head = try service.status().lastSeq
            detail.send(.toggle)
            #expect(detail(\.lastError) == .postNotFound("post1"))
            #expect(try service.status().lastSeq == head, "a like on a deleted post writes nothing")
        }
    }

    /// The delete committed but its event has not reached the detail yet: the like fails with the unknown-post
    /// error, and that is what turns the screen "deleted".
    @Test func aLikeThatLosesTheRaceTurnsTheDetailDeleted() {
        var state = PostDetailProjection.State(postID: "post1", viewerID: "user2")
        let post = Post(id: "post1", authorID: "user1", body: "", createdAt: Date(timeIntervalSince1970: 0), likeCount: 3, sequence: 1)
        _ = PostDetailProjection.reduce(&state, .loaded(.success(PostDetail(post: post, liked: false))))
        #expect(!state.isDeleted)
        #expect(PostDetailProjection.reduce(&state, .like).count == 1)
        _ = PostDetailProjection.reduce(&state, .commandResponse(.failure(.postNotFound("post1"))))
        #expect(state.isDeleted)
        #expect(state.likeCount == 0)
        #expect(PostDetailProjection.reduce(&state, .like).isEmpty, "no command for a deleted post")
    }

    @Test(arguments: TestBackend.allCases)
    func subscribersAndStreamsGetEachDeletionOnceInOrder(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        _ = try await service.like(userID: "user2", postID: "post1")
        _ = try await service.like(userID: "user1", postID: "post3")
        let head = try await service.status().lastSeq
        let handled = LockedLog<EventRecord>()
        let subscriber = DurableSubscriber(
            name: "deletions", service: service, delivery: .atLeastOnce { handled.append($0) })
        #expect(try subscriber.catchUp() == Int(head))
        let consumer = Task { () throws -> [EventRecord] in
            var streamed: [EventRecord] = []
            for try await batch in service.changes(after: head) {
                streamed += batch
                if streamed.contains(where: { $0.kind == .userDeleted }) { break }
            }
            return streamed
        }
        _ = try await service.deletePost(postID: "post2", by: "user1")
        _ = try await service.deletePost(postID: "post2", by: "user1")
        _ = try await service.deleteUser(userID: "user1")
        let written = try await service.events(after: head)
        // post2, then the erasure: user1's other posts (post1 with user2's like, post3 with user1's own) and the user.
        #expect(written.map(\.kind) == [.postDeleted, .postDeleted, .postDeleted, .userDeleted])
        #expect(written.allSatisfy { $0.userID.isEmpty }, "the erasure scrubbed the first deletion too")

        let streamed = try await value(of: consumer, within: 30, "the deletions on the change stream")
        #expect(streamed.map(\.seq) == written.map(\.seq))
        #expect(streamed.map(\.kind) == written.map(\.kind))
        #expect(try subscriber.catchUp() == written.count)
        #expect(try subscriber.catchUp() == 0, "nothing is delivered twice")
        let delivered = handled.values.filter { $0.seq > head }
        #expect(delivered.map(\.seq) == written.map(\.seq))
        #expect(delivered.map(\.kind) == written.map(\.kind))
    }
}
