import Dispatch
import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// On PostgreSQL, commands of one service run their row work in parallel, each in a transaction on a connection of
/// its own, and queue only for the event append and the commit (the `event_log_head` row is the last lock a
/// transaction takes). Were the head taken first and held to the commit, one slow command would hold up every
/// other.
// Blocks: a thread holds a post's row lock on the PostgreSQL server while writers wait on it; semaphores.
@Suite(.ownThreads) struct PostgresParallelWritesTests {
    @Test func aCommandBlockedOnOnePostLetsACommandOnAnotherCommitFirstAndSeqsFollowCommitOrder() throws {
        let dir = TemporaryDirectory()
        guard let url = try TestBackend.postgresql.makeLocation(in: dir, "parallel_writes") else { return }
        let service = try makeService(at: url)  // seqs 1...6
        let delivered = Recorder(service.bridge.changes)

        // Another session locks post1's row and holds it: a toggle of post1 blocks in its row work (the like
        // trigger's UPDATE of posts), before it appends its event.
        let holder = try FeedBackends.open(FeedLocation(url))
        defer { holder.close() }
        let locked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holding = Thread {
            _ = try? holder.write(
                { tx in
                    _ = try tx.userStatements.fetch("SELECT like_count FROM posts WHERE id = $1 FOR UPDATE", [.text("post1")])
                    locked.signal()
                    _ = release.wait(timeout: .now() + 60)
                }, afterCommit: { _ in })
        }
        holding.start()
        #expect(locked.wait(timeout: .now() + 30) == .success, "the holder did not lock post1")

        let slow = Box<Result<LikeResult, FeedError>?>(nil)
        let slowDone = DispatchSemaphore(value: 0)
        Thread {
            let result = Result(catching: { () throws(FeedError) -> LikeResult in try service.toggle(userID: "user2", postID: "post1") })
            slow.withLock { $0 = result }
            slowDone.signal()
        }.start()
        // The blocked toggle is waiting on the row lock, not on the log: shown by the server.
        #expect(try waitForRowLockWait(holder), "the toggle of post1 never waited for post1's row")

        // A toggle of post2 from another thread of the same service commits while the first is still blocked.
        let fast = try service.toggle(userID: "user3", postID: "post2")
        #expect(fast.seq == 7)
        #expect(slow.withLock { $0 } == nil, "the toggle of post1 returned while post1 was locked")

        release.signal()
        #expect(slowDone.wait(timeout: .now() + 30) == .success, "the toggle of post1 did not finish once released")
        let slowResult = try #require(slow.withLock { $0 }).get()
        #expect(slowResult.seq == 8)
        #expect(slowResult.liked && slowResult.likeCount == 1)
        // Delivered in seq order, each once, and the log agrees.
        #expect(delivered.wait(seconds: 30) { $0.count >= 2 })
        #expect(delivered.values.map(\.seq) == [7, 8])
        #expect(try service.events(after: 6).map(\.seq) == [7, 8])
        #expect(try service.events(after: 6).map(\.postID) == ["post2", "post1"])
    }

    /// Waits (at most 30 s) until some session of the database waits for a row lock (`pg_stat_activity`).
    private func waitForRowLockWait(_ backend: any FeedBackend) throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let waiting = try backend.readOnce { tx in
                try tx.userStatements.fetch(
                    """
                    SELECT count(*) FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'transactionid'
                    """, [])
            }
            if case .integer(let count) = waiting.first?.first, count > 0 { return true }
            // A poll of the server's own view, not a sleep standing in for an event: the wait has no other signal.
            usleep(2_000)
        }
        return false
    }
}
