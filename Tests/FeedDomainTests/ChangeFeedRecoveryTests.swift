@testable import FeedDomain
import FeedCore
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// A change the feed has seen is published even when a step between "the database changed" and "its events were
/// published" fails: the next pass reads the log whatever the watch says then.
///
/// Each test fails one step once, on the first pass that runs after another service committed, and waits (bounded)
/// for that commit to reach the bridge with no further commit and a poll interval far beyond the wait: only a feed
/// that kept the change signal through the failure delivers it.
// Blocks: waits up to 20 s for the change feed and a subscriber to recover and deliver.
@Suite(.ownThreads) struct ChangeFeedRecoveryTests {
    /// Where a test fails the feed's pass.
    enum FailingStep: String, CaseIterable, CustomTestStringConvertible {
        /// The read of the log after the watch reported the change.
        case readOfTheLog
        /// The second batch of the read (one event a batch), after the first batch was published.
        case secondBatch

        var testDescription: String { rawValue }
    }

    static let cases: [(TestBackend, FailingStep)] = TestBackend.allCases.flatMap { backend in
        FailingStep.allCases.map { (backend, $0) }
    }

    @Test(arguments: cases)
    func aChangeSeenBeforeAFailedPassIsPublishedByTheNextPass(on backend: TestBackend, failing step: FailingStep) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir, "feed_recovery") else { return }
        let listening = try makeService(at: location)
        let other = try FeedService(location: location)
        let seeded = try other.events(after: 0).last?.seq ?? 0
        // Three events for the batch case (one a batch), one for the read case.
        let commits = step == .secondBatch ? 3 : 1

        var options = ChangeFeed.Options()
        // No timer rescues a lost signal within the test's wait; retries come after 10 ms.
        options.pollInterval = .seconds(120)
        options.maximumBackoff = .milliseconds(10)
        options.publishBatchSize = 1
        let fired = Box(false)
        let target: ChangeFeed.Stage = step == .secondBatch ? .beforeBatch(1) : .beforePublish
        options.stageFaultInjector = { stage in
            guard stage == target else { return }
            // Only once every commit of the test is in the log, so that the failure is between "the head moved" and
            // "the events were published".
            let committed = (try? other.events(after: seeded).count) ?? 0
            let fire =
                committed >= commits
                && fired.withLock { done in
                    defer { done = true }
                    return !done
                }
            if fire { throw FeedError.storage(.connectionLost(location: "test", reason: "injected before \(stage)")) }
        }
        let feed = ChangeFeed(service: listening, options: options)
        let errors = Recorder(feed.errors)
        let received = Recorder(listening.bridge.changes)
        try feed.start()
        defer { feed.stop() }

        // One transaction: every event of the test becomes visible at once, so one pass sees them all.
        let results = try other.perform(
            (1...commits).map { LikeCommand(.like, userID: "user2", postID: "post\($0)") })
        let last = try #require(results.last?.seq)
        #expect(received.wait(seconds: 20) { $0.last?.seq == last }, "seqs received: \(received.values.map(\.seq))")
        #expect(fired.withLock { $0 }, "the failure was injected")
        #expect(errors.values.count == 1, "errors: \(errors.values)")
        let seqs = received.values.map(\.seq).filter { $0 > seeded }
        #expect(seqs == Array((seeded + 1)...last), "each seq once, in order")
        #expect(feed.isRunning)
    }

    /// A live durable subscriber whose pass fails (its handler throws once, as a lost connection would make it) applies
    /// the event on a retry of its own, with no later commit to schedule another pass.
    @Test(arguments: TestBackend.allCases)
    func aDurableSubscriberRetriesAFailedPassWithoutALaterCommit(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try service.executeSQL("CREATE TABLE recovered (seq BIGINT PRIMARY KEY)")
        let failures = Box(1)
        struct Injected: Error {}
        let subscriber = DurableSubscriber(
            name: "recovering", service: service, batchSize: 10,
            delivery: .transactional { event, tx in
                let fail =
                    event.kind == .liked
                    && failures.withLock { left in
                        defer { left = max(0, left - 1) }
                        return left > 0
                    }
                if fail { throw Injected() }
                try tx.run("INSERT INTO recovered (seq) VALUES (?)", event.seq)
            })
        let signals = Recorder(subscriber.signals)
        try subscriber.start()
        defer { subscriber.stop() }
        let seq = try #require(try service.like(userID: "user2", postID: "post1").seq)
        let caughtUp = signals.wait(seconds: 20) { $0.contains { if case .caughtUp(let through) = $0 { through >= seq } else { false } } }
        #expect(caughtUp, "signals: \(signals.values)")
        #expect(signals.values.contains { if case .failed = $0 { true } else { false } }, "the pass failed once")
        let applied = try service.firstColumn("SELECT seq FROM recovered ORDER BY seq").compactMap(\.integer)
        #expect(applied.last == seq && Set(applied).count == applied.count, "applied: \(applied)")
    }
}
