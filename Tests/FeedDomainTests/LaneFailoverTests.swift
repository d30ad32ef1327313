import FeedCore
import FeedSync
@testable import FeedDomain
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// A like batch in doubt across a failover: sent on its lane to a primary that committed it (and, synchronously, its
/// standby) and then died before the answer came back. The pool sends such a batch once more on a new connection; here
/// that second send reaches the promoted standby, as it would once the promotion is done. It answers with what the
/// batch did the first time and changes nothing — a toggle sent twice still likes — while the lane's next batch applies.
/// The same units on another lane toggle again: the lane, not the like's state, made the second send harmless.
// Blocks: runs `.ci/postgres-server.sh` as a child process and waits for it (through `StandbyPair`).
@Suite(.serialized, .ownThreads) struct LaneFailoverTests {
    @Test func aBatchSentAgainOnItsLaneToThePromotedSynchronousStandbyAppliesOnce() throws {
        guard
            let pair = try StandbyPair(
                "lane-failover", synchronous: true,
                prepare: { primary throws in
                    let setUp = try FeedService(location: primary.primary)
                    defer { setUp.close() }
                    for user in ["alice", "bob"] { try setUp.createUser(id: user) }
                    try setUp.createPost(id: "p1", authorID: "bob", body: "hello")
                })
        else { return }
        // The servers go when the pair is released: not before the test ends.
        defer { withExtendedLifetime(pair) {} }
        let service = try FeedService(location: pair.both)
        defer { service.close() }

        let lane = UUID().uuidString.lowercased()
        let toggle = LaneBatch(lane: lane, at: Int64(Date().timeIntervalSince1970 * 1000))
        let first = try toggle.send(number: 1, on: service)
        #expect(first.liked && first.changed && first.likeCount == 1, "\(first)")
        let firstSeq = try #require(first.seq)

        // The primary dies with the answer "lost"; the synchronous standby is promoted.
        try pair.script("kill", pair.primaryDir)
        try pair.script("promote", pair.standbyDir)

        // The batch is sent again, on its lane, once the new primary takes writes.
        let deadline = ContinuousClock.now + .seconds(60)
        var again: LaneBatch.Answer?
        while again == nil, ContinuousClock.now < deadline {
            again = try? toggle.send(number: 1, sentBefore: true, on: service)
        }
        let resent = try #require(again, "the new primary took no write within 60 s")
        #expect(resent == first, "sent again: \(resent), first: \(first)")
        let detail = try service.post(id: "p1", viewerID: "alice")
        #expect(detail.liked && detail.post.likeCount == 1, "\(detail)")
        #expect(try service.events(after: firstSeq - 1, limit: 10).map(\.seq) == [firstSeq], "one event for the batch")

        // The lane goes on: its next batch applies (the toggle unlikes).
        let second = try toggle.send(number: 2, on: service)
        #expect(!second.liked && second.changed && second.seq == firstSeq + 1, "\(second)")
        // The control: the same toggle on another lane applies again — only the lane made the second send harmless.
        let other = try LaneBatch(lane: UUID().uuidString.lowercased(), at: toggle.at).send(number: 1, on: service)
        #expect(other.liked && other.changed && other.seq == firstSeq + 2, "\(other)")
        #expect(try service.check().map(\.description) == [])
    }
}

/// One toggle of alice's like of p1, sent as batch `number` of `lane` through the like function that lanes use.
private struct LaneBatch {
    struct Answer: Equatable, CustomStringConvertible {
        let liked: Bool
        let likeCount: Int64?
        let changed: Bool
        let seq: Int64?
        var description: String {
            "liked \(liked), changed \(changed), count \(likeCount.map(String.init) ?? "-"), seq \(seq.map(String.init) ?? "-")"
        }
    }

    let lane: String
    let at: Int64

    /// Sends the toggle as batch `number`: a first send through the function that records the lane without reading
    /// it, a send of a batch sent before through the one that reads the lane first (as the pool's re-send does).
    func send(number: Int64, sentBefore: Bool = false, on service: FeedService) throws -> Answer {
        let call =
            sentBefore
            ? "feedsync_apply_likes_once($1::uuid, $2, $4::integer[], $5::text[], $6::text[], $7::text[], ARRAY[$3::bigint])"
            : "unnest(feedsync_apply_likes_first_send($1::uuid, $2, $4::integer[], $5::text[], $6::text[], $7::text[], ARRAY[$3::bigint]))"
        let rows = try service.backend.write(
            { tx in
                try tx.userStatements.fetch(
                    "SELECT liked::integer, like_count, changed::integer, seq FROM \(call)",
                    [.text(lane), .integer(number), .integer(at), .text("{1}"), .text("{toggle}"), .text("{alice}"), .text("{p1}")])
            }, afterCommit: { _ in })
        guard rows.count == 1, rows[0].count == 4 else { throw LaneBatchError(rows: rows.count) }
        let row = rows[0]
        return Answer(liked: row[0].integer == 1, likeCount: row[1].integer, changed: row[2].integer == 1, seq: row[3].integer)
    }
}

private struct LaneBatchError: Error, CustomStringConvertible {
    let rows: Int
    var description: String { "the like function returned \(rows) rows for one command" }
}
