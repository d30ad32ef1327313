import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// A log rewritten under a running follower — what a failover to a standby that lacked the last commits, or a
/// restored backup, does — is found on the follower's next read, and each follower is told instead of going on as if
/// the new events continued the old ones: the change feed reports ``FeedError/historyRewritten(after:head:)``, the
/// bridge sends one ``HistoryRewrite`` and then only events after its head, and a `changes(after:)` stream ends with
/// the error. Here another connection rewrites the log directly: it deletes the last events (on PostgreSQL it also
/// moves the log's head back), as a promoted standby that never received them would hold it.
// Blocks: waits for the follower's threads and a stream on a thread of its own.
@Suite(.serialized, .ownThreads) struct HistoryRewriteTests {
    /// Rewrites `service`'s log after `fork` in one transaction, as a promoted standby that never received the events
    /// after it would hold it: they go, and `count` other likes take their seqs (`fork + 1`, …); the next commit
    /// follows them.
    static func rewrite(_ service: FeedService, after fork: Int64, newEvents count: Int, on backend: TestBackend) throws {
        _ = try service.backend.write(
            { tx in
                if backend == .postgresql {
                    // The head first: it waits for the appenders holding it, whose events the DELETE then sees.
                    try tx.userStatements.execute(
                        "UPDATE event_log_head SET last_seq = $1 WHERE id = 1", [.integer(fork + Int64(count))])
                }
                try tx.userStatements.execute("DELETE FROM events WHERE seq > $1", [.integer(fork)])
                for index in 0..<Int64(count) {
                    try tx.userStatements.execute(
                        "INSERT INTO events (seq, kind, user_id, post_id, like_count, at) VALUES ($1, 'liked', 'user3', 'post1', $2, $3)",
                        [.integer(fork + 1 + index), .integer(100 + index), .integer(Int64(Date().timeIntervalSince1970 * 1000))])
                }
            }, afterCommit: { _ in })
    }

    /// The events after the fork are replaced by more events than there were (seqs come back naming other events): the
    /// follower finds the event at its last seq changed.
    @Test(arguments: TestBackend.allCases)
    func aSeqThatNowNamesAnotherEventIsFoundAndNoFollowerGoesOn(on backend: TestBackend) throws {
        try check(on: backend, newEvents: 5)
    }

    /// The events after the fork are gone and nothing replaced them yet: the follower finds its last seq beyond the
    /// log's head; what is committed afterwards reaches the bridge as new.
    @Test(arguments: TestBackend.allCases)
    func aPositionBeyondTheLogsHeadIsFoundAndNoFollowerGoesOn(on backend: TestBackend) throws {
        try check(on: backend, newEvents: 0)
    }

    /// A replica's cursor carries its event's check value: after the log was rewritten under it, its seq names another
    /// event, and its next pull is answered with a resync snapshot instead of the changes after that seq.
    @Test(arguments: TestBackend.allCases)
    func aReplicaWhoseCursorNowNamesAnotherEventIsResynced(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        try await world.source.like(userID: "alice", postID: "p1")
        let phone = try await world.replica("phone", of: "alice")
        try await world.source.like(userID: "bob", postID: "p2")
        let step = try await phone.sync.sync()
        #expect(!step.resynced && step.pulled == 1)
        let head = try await world.source.status().lastSeq
        #expect(step.lastSyncedSeq == head)

        try Self.rewrite(world.source, after: head - 1, newEvents: 3, on: backend)
        let report = try await phone.sync.sync()
        #expect(report.resynced, "the replica's seq \(head) names another event now: it gets a snapshot")
        #expect(report.lastSyncedSeq == head + 2)
        try world.expectAgrees(phone)
        let again = try await phone.sync.sync()
        #expect(!again.resynced && again.pulled == 0, "the snapshot's cursor carries the new event's check")
    }

    private func check(on backend: TestBackend, newEvents: Int) throws {
        let dir = TemporaryDirectory("feedsync-rewrite")
        guard let location = try backend.makeLocation(in: dir) else { return }
        let writer = try FeedService(location: location)
        defer { writer.close() }
        for user in 1...3 { try writer.createUser(id: "user\(user)") }
        for post in 1...4 { try writer.createPost(id: "post\(post)", authorID: "user1", body: "post \(post)") }

        let follower = try FeedService(location: location)
        defer { follower.close() }
        let base = try follower.status().lastSeq
        let feed = ChangeFeed(service: follower)
        let feedErrors = Recorder(feed.errors)
        let rewrites = Recorder(follower.bridge.historyRewrites)
        let delivered = Recorder(follower.bridge.changes.map(\.seq))
        try feed.start()
        defer { feed.stop() }
        let streamed = LockedLog<Int64>()
        let streamError = LockedLog<FeedError>()
        let stream = Task.detached(executorPreference: ThreadPerJobExecutor.shared) {
            do {
                for try await batch in follower.changes(after: 0) { for event in batch { streamed.append(event.seq) } }
            } catch {
                streamError.append(FeedError.wrap(error))
            }
        }
        defer { stream.cancel() }

        for post in 1...4 { try writer.like(userID: "user2", postID: "post\(post)") }
        let head = try writer.status().lastSeq
        #expect(delivered.wait(seconds: 30) { $0.last == head }, "the bridge delivers through \(head): \(delivered.values.suffix(3))")
        #expect(streamed.wait(seconds: 30) { $0.last == head }, "the stream hands out through \(head)")

        let fork = head - 3
        try Self.rewrite(writer, after: fork, newEvents: newEvents, on: backend)
        let newHead = try writer.status().lastSeq
        #expect(newHead == fork + Int64(newEvents))

        #expect(rewrites.wait(seconds: 30) { !$0.isEmpty }, "the bridge sends the rewrite (feed errors: \(feedErrors.values))")
        #expect(rewrites.values == [HistoryRewrite(after: head, head: newHead)], "one rewrite, found at the new head")
        let rebasedAt = newHead
        #expect(streamError.wait(seconds: 30) { !$0.isEmpty }, "the stream ends with the rewrite")
        if case .historyRewritten(let after, _)? = streamError.values.first {
            #expect(after == head, "the stream was at \(head)")
        } else {
            Issue.record("the stream ended with \(streamError.values), not historyRewritten")
        }

        // Delivery goes on after the rewrite's head, each seq once, and no follower was handed the new events as if
        // they continued the old history.
        let next = try #require(try writer.like(userID: "user1", postID: "post1").seq)
        #expect(delivered.wait(seconds: 30) { $0.last == next }, "the bridge delivers \(next): \(delivered.values.suffix(5))")
        let seqs = delivered.values
        #expect(seqs == Array((base + 1)...head) + Array((rebasedAt + 1)...next), "the old history, then after the rewrite")
        #expect(streamed.values == Array(1...head), "the stream handed out nothing of the new history")
        #expect(follower.bridge.waitForDelivery(through: next, timeout: .seconds(10)))
    }
}
