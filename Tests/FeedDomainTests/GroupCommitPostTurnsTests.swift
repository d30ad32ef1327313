import FeedCore
@testable import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Where two batches run at once (PostgreSQL), they keep out of each other's posts: a caller whose post a running
/// batch holds waits in the queue for that batch instead of starting a second transaction that would wait for the
/// post's row lock in the database, while callers on other posts still use the second slot.
// Blocks: caller threads wait behind a post row held by another transaction; waits for them, bounded.
@Suite(.ownThreads) struct GroupCommitPostTurnsTests {
    @Test func aCallerOnAPostARunningBatchHoldsWaitsForItWhileOtherPostsGoAhead() throws {
        let dir = TemporaryDirectory()
        guard let location = try TestBackend.postgresql.makeLocation(in: dir, "post_turns") else { return }
        let service = try FeedService(location: location)
        defer { service.close() }
        for user in ["user1", "user2", "user3"] { try service.createUser(id: user) }
        for post in ["post1", "post2"] { try service.createPost(id: post, authorID: "user1", body: post) }
        #expect(service.backend.traits.concurrentWriteTransactions == 2)

        // Another connection holds post1's row until the test lets it go: a batch on post1 waits in the database.
        let blocker = try FeedService(location: location)
        defer { blocker.close() }
        let holding = DispatchSemaphore(value: 0)
        let letGo = DispatchSemaphore(value: 0)
        let blocked = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            _ = try? blocker.backend.write(
                { tx in
                    _ = try tx.userStatements.fetch("SELECT like_count FROM posts WHERE id = $1 FOR UPDATE", [.text("post1")])
                    holding.signal()
                    letGo.wait()
                }, afterCommit: { _ in })
            blocked.signal()
        }
        try #require(holding.wait(timeout: .now() + 30) == .success, "the blocker never took post1's row")
        var released = false
        defer { if !released { letGo.signal() } }

        let calls = LockedLog<(String, Result<LikeResult, FeedError>)>()
        let done = DispatchGroup()
        func like(_ user: String, _ post: String) {
            done.enter()
            Thread.detachNewThread {
                calls.append((user, Result { () throws(FeedError) in try service.like(userID: user, postID: post) }))
                done.leave()
            }
        }
        func lockWaiters() throws -> Int64 {
            let rows = try blocker.backend.readOnce { tx in
                try tx.userStatements.fetch(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
                    [])
            }
            if case .integer(let count)? = rows.first?.first { return count }
            return -1
        }

        // user1's batch leads the first slot and waits for post1's row in the database.
        like("user1", "post1")
        #expect(eventually(seconds: 30) { (try? lockWaiters()) == 1 }, "user1's batch never waited for post1")
        // user2, also on post1, waits in the queue: the second slot stays free, and no second transaction waits.
        like("user2", "post1")
        #expect(eventually(seconds: 30) { service.group.queue.waiting == 1 }, "user2 did not wait for the batch on post1")
        // user3, on post2, takes the second slot and commits while post1 is still held.
        like("user3", "post2")
        #expect(eventually(seconds: 30) { calls.values.contains { $0.0 == "user3" } }, "user3 waited behind post1")
        #expect(try lockWaiters() == 1, "a second transaction waits for post1's row")
        #expect(calls.values.map(\.0) == ["user3"])

        letGo.signal()
        released = true
        #expect(blocked.wait(timeout: .now() + 30) == .success)
        try #require(done.wait(timeout: .now() + 30) == .success, "the callers on post1 never returned")
        for (user, result) in calls.values {
            #expect((try? result.get())?.liked == true, "\(user): \(result)")
        }
        #expect(try service.post(id: "post1", viewerID: nil).post.likeCount == 2)
        #expect(try service.post(id: "post2", viewerID: nil).post.likeCount == 1)
        #expect(try service.check().isEmpty)
    }
}
