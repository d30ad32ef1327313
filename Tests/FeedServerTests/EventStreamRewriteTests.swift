import FeedCore
import FeedServer
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// `GET /api/events` over a log rewritten under the server — what a failover to a standby that lacked the last commits,
/// or a restored backup, does (here another process deletes the last events and others take their seqs): an open
/// stream ends with `event: historyRewritten`, and a client that comes back with the id of an event the log no longer
/// holds under that seq, or with a seq beyond the head, is told so at once instead of being sent the new events as if
/// they continued the old ones.
// Blocks: waits for an in-process HTTP server's event streams.
@Suite(.ownThreads) struct EventStreamRewriteTests {
    @Test(arguments: TestBackend.allCases)
    func streamsOverARewrittenLogAreToldAndOldIDsAreRefused(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend, watchOtherProcesses: true) else { return }
        defer { sut.close() }
        let other = try FeedService(location: sut.location)
        defer { other.close() }
        try other.like(userID: "bob", postID: "p1")
        try other.like(userID: "carol", postID: "p1")
        let head = try other.status().lastSeq
        let live = try EventFollower(port: sut.port, token: "tok-alice")
        defer { live.close() }
        #expect(live.wait { $0.seqs.last == head })
        let oldID = try #require(live.received.last?.id)

        // Another process rewrites the log: the last event goes and three others take its seq and the next ones.
        _ = try other.backend.write(
            { tx in
                if backend == .postgresql {
                    try tx.userStatements.execute("UPDATE event_log_head SET last_seq = $1 WHERE id = 1", [.integer(head + 2)])
                }
                try tx.userStatements.execute("DELETE FROM events WHERE seq >= $1", [.integer(head)])
                for index in 0..<Int64(3) {
                    try tx.userStatements.execute(
                        "INSERT INTO events (seq, kind, user_id, post_id, like_count, at) VALUES ($1, 'liked', 'carol', 'p2', $2, $3)",
                        [.integer(head + index), .integer(1 + index), .integer(Int64(Date().timeIntervalSince1970 * 1000) + 5)])
                }
            }, afterCommit: { _ in })
        let newHead = head + 2

        #expect(live.wait(timeout: 30) { $0.isEnded }, "the open stream ends")
        let final = try #require(live.received.last)
        #expect(final.name == "historyRewritten", "\(live.received.suffix(2))")
        #expect(final.data == #"{"lastEventID":\#(head),"head":\#(newHead)}"#)
        #expect(live.seqs == Array(1...head), "the stream sent nothing of the new history")

        // Coming back with the old event's id: its seq names another event now.
        let back = try EventFollower(port: sut.port, token: "tok-alice", lastEventID: oldID)
        defer { back.close() }
        #expect(back.wait(timeout: 30) { $0.isEnded })
        #expect(back.received.map(\.name) == ["historyRewritten"], "\(back.received)")
        // Beyond the head: the same.
        let beyond = try EventFollower(port: sut.port, token: "tok-alice", lastEventID: String(newHead + 5))
        defer { beyond.close() }
        #expect(beyond.wait(timeout: 30) { $0.isEnded })
        #expect(beyond.received.map(\.name) == ["historyRewritten"], "\(beyond.received)")
        // From the new head's own id, the stream goes on.
        let fresh = try EventFollower(port: sut.port, token: "tok-alice", query: "?after=\(head - 1)")
        defer { fresh.close() }
        #expect(fresh.wait(timeout: 30) { $0.seqs.last == newHead })
        let newID = try #require(fresh.received.last?.id)
        let resumed = try EventFollower(port: sut.port, token: "tok-alice", lastEventID: newID)
        defer { resumed.close() }
        let next = try #require(try other.like(userID: "bob", postID: "p3").seq)
        #expect(resumed.wait(timeout: 30) { $0.seqs == [next] }, "\(resumed.received)")
        #expect(try sut.request("GET", "/api/events?after=1.zz", token: "tok-alice").status == 400)
    }

    /// The server finds a rewrite by itself (here its look at the log's head, the bridge not watching); the bridge
    /// finds the same rewrite later. A stream begun in between, on the new history, is not ended by the bridge's word.
    @Test(arguments: TestBackend.allCases)
    func aRewriteIsToldOnceWhoeverFindsItAndLaterStreamsGoOn(on backend: TestBackend) throws {
        guard let sut = try ServerFixture(on: backend) else { return }
        defer { sut.close() }
        try sut.service.like(userID: "bob", postID: "p1")
        try sut.service.like(userID: "carol", postID: "p1")
        let head = try sut.service.status().lastSeq
        let live = try EventFollower(port: sut.port, token: "tok-alice")
        defer { live.close() }
        #expect(live.wait { $0.seqs.last == head })

        // Another process takes the last event away (the log's head goes back by one).
        let other = try FeedService(location: sut.location)
        defer { other.close() }
        _ = try other.backend.write(
            { tx in
                if backend == .postgresql {
                    try tx.userStatements.execute("UPDATE event_log_head SET last_seq = $1 WHERE id = 1", [.integer(head - 1)])
                }
                try tx.userStatements.execute("DELETE FROM events WHERE seq >= $1", [.integer(head)])
            }, afterCommit: { _ in })
        #expect(live.wait(timeout: 30) { $0.isEnded }, "the server finds the rewrite itself")
        #expect(live.received.last?.data == #"{"lastEventID":\#(head),"head":\#(head - 1)}"#, "\(live.received.suffix(2))")

        let fresh = try EventFollower(port: sut.port, token: "tok-alice", query: "?after=\(head - 2)")
        defer { fresh.close() }
        #expect(fresh.wait(timeout: 30) { $0.seqs.last == head - 1 })
        // The bridge finds the rewrite now, then a like follows: the stream gets the like, and is not ended.
        #expect(throws: FeedError.self) { try sut.service.publishCommittedEvents() }
        let next = try #require(try sut.service.like(userID: "alice", postID: "p3").seq)
        #expect(fresh.wait(timeout: 30) { $0.seqs.last == next || $0.isEnded })
        #expect(fresh.seqs == [head - 1, next], "\(fresh.received)")
        #expect(!fresh.isEnded)
    }
}
