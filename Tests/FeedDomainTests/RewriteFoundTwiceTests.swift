import FeedCore
@testable import FeedDomain
import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// Two readers of the log — the change feed's pass and a catch-up, say — each found the same rewrite before either
/// rebased, and the new log's head is the very seq they knew (as many new events as were lost). The bridge rebases
/// once and tells it once: the second reader's rebase is refused because the sequencer's epoch moved, though the
/// highest seq known is the same again.
@Suite struct RewriteFoundTwiceTests {
    @Test(arguments: TestBackend.allCases)
    func aRewriteTwoReadersFoundIsToldOnce(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        service.settle()
        let told = Recorder(service.bridge.historyRewrites)
        let sequencer = service.bridge.sequencer
        let known = try #require(sequencer.highestKnownSeq)
        // Both readers took the epoch and read the log before either rebased.
        let epoch = sequencer.epoch
        #expect(sequencer.rebase(to: known, ifKnown: known, epoch: epoch) != nil, "the first reader rebases")
        #expect(sequencer.rebase(to: known, ifKnown: known, epoch: epoch) == nil, "the second is refused")
        #expect(told.wait { $0.count == 1 })

        // The next reader, after the rebase, may find a later rewrite.
        let seq = try #require(try service.like(userID: "user2", postID: "post1").seq)
        #expect(service.waitForDelivery(through: seq))
        #expect(told.values.count == 1, "\(told.values)")
        #expect(sequencer.rebase(to: seq, ifKnown: seq, epoch: sequencer.epoch) != nil)
        #expect(told.wait { $0.count == 2 })
    }
}
