import FeedCore
@testable import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// The log rewritten while it is written: two threads of the follower's process and another process commit likes
/// without pause, and another connection rewrites the log twice (the last events go, others take their seqs, in one
/// transaction). Every subscriber of the follower's bridge gets a sequence with no repeat and no gap between rewrites,
/// each rewrite where the new history starts, and the events after the last one as the log holds them; a
/// `changes(after:)` stream ends with the error. A watchdog fails the test on a stall.
// Blocks: worker threads, a child process, and waits for them.
@Suite(.serialized, .ownThreads) struct HistoryRewriteStressTests {
    /// What one bridge queue received, in order.
    enum Delivery: Equatable {
        case event(EventRecord)
        case rewrite(HistoryRewrite)
    }

    @Test(arguments: TestBackend.allCases)
    func rewritesUnderConcurrentWritersAreEachToldOnceAndNothingIsRepeatedOrSkipped(on backend: TestBackend) throws {
        let dir = TemporaryDirectory("feedsync-rewrite-stress")
        guard let location = try backend.makeLocation(in: dir) else { return }
        let rewriter = try FeedService(location: location)
        defer { rewriter.close() }
        for user in 1...20 { try rewriter.createUser(id: "user\(user)") }
        for post in 1...50 { try rewriter.createPost(id: "post\(post)", authorID: "user1", body: "post \(post)") }

        let follower = try FeedService(location: location)
        defer { follower.close() }
        let received = LockedLog<Delivery>()
        let subscription = follower.bridge.subscribe(
            deliver: { received.append(.event($0)) }, rewritten: { received.append(.rewrite($0)) })
        defer { subscription.cancel() }
        let feed = ChangeFeed(service: follower)
        try feed.start()
        defer { feed.stop() }
        let streamError = LockedLog<FeedError>()
        let stream = Task.detached(executorPreference: ThreadPerJobExecutor.shared) {
            do {
                for try await _ in follower.changes(after: 0) {}
            } catch {
                streamError.append(FeedError.wrap(error))
            }
        }
        defer { stream.cancel() }

        let child = try Child(
            try benchExecutable(),
            ["agent-acks", "--db", location, "--seed", "7", "--users", "11-20", "--posts", "50", "--rate", "100"])
        defer { child.kill() }
        let stop = LockedValue(false)
        let writeErrors = LockedLog<String>()
        let committed = LockedLog<Int64>()
        let watchdog = Watchdog(stallTimeout: .seconds(20), limit: .seconds(120))
        for thread in 1...2 {
            watchdog.spawn("writer-\(thread)") { worker in
                var random = FaultRandom(seed: UInt64(thread))
                var count = 0
                while !stop.withLock({ $0 }) {
                    count += 1
                    worker.step("toggle \(count)")
                    let user = "user\(1 + thread * 3 + Int(random.next(3)))"
                    do {
                        if let seq = try follower.toggle(userID: user, postID: "post\(1 + random.next(50))").seq {
                            committed.append(seq)
                        }
                    } catch {
                        if writeErrors.values.count < 5 { writeErrors.append("\(error)") }
                    }
                    // About 1,000 toggles a second per thread, like the other process: enough to race every rewrite,
                    // without flooding ThreadSanitizer's history.
                    usleep(1000)
                }
            }
        }
        watchdog.spawn("rewriter") { worker in
            for round in 1...2 {
                worker.step("round \(round): waiting for 60 more local commits")
                let target = committed.values.count + 60
                guard committed.wait(seconds: 60, until: { $0.count >= target }) else {
                    Issue.record("round \(round): the writers committed \(committed.values.count) likes, not \(target), in 60 s")
                    stop.withLock { $0 = true }
                    return
                }
                worker.step("round \(round): rewriting")
                do {
                    let head = try rewriter.status().lastSeq
                    try HistoryRewriteTests.rewrite(rewriter, after: head - 20, newEvents: 5, on: backend)
                } catch {
                    Issue.record("round \(round): the rewrite failed: \(error)")
                }
            }
            worker.step("letting the writers go on")
            let target = committed.values.count + 40
            _ = committed.wait(seconds: 60, until: { $0.count >= target })
            stop.withLock { $0 = true }
        }
        if case .stalled(let report) = watchdog.waitForWorkers() {
            stop.withLock { $0 = true }
            Watchdog.abandon([rewriter, follower, dir])
            Issue.record(Comment(rawValue: report + "\nwrite errors: \(writeErrors.values)"))
            return
        }
        child.kill()
        let head = try rewriter.status().lastSeq
        #expect(follower.bridge.waitForDelivery(through: head, timeout: .seconds(60)))
        #expect(
            received.wait(seconds: 60) { deliveries in
                if case .event(let event)? = deliveries.last { return event.seq >= head }
                return false
            })

        // Between rewrites, each seq once and in order, with no gap; a rewrite's new history starts after its head.
        // The stretch a rewrite declares old — after its head, up to where it was found — may have holes: it was read
        // from a log being rewritten, and is to be rebuilt from the tables.
        let deliveries = received.values
        var previous: Int64?
        var rewrites: [HistoryRewrite] = []
        var problems: [String] = []
        for (index, delivery) in deliveries.enumerated() {
            switch delivery {
            case .event(let event):
                if let previous, event.seq != previous + 1 {
                    let next = deliveries[index...].lazy.compactMap { delivery -> HistoryRewrite? in
                        if case .rewrite(let rewrite) = delivery { return rewrite }
                        return nil
                    }.first
                    let doomed = next.map { $0.head <= previous && event.seq <= $0.after } ?? false
                    if !doomed { problems.append("seq \(event.seq) after \(previous)") }
                }
                previous = event.seq
            case .rewrite(let rewrite):
                if let previous, rewrite.after < previous { problems.append("\(rewrite) after seq \(previous)") }
                rewrites.append(rewrite)
                previous = rewrite.head
            }
        }
        #expect(problems == [], "the bridge's deliveries: \(problems.prefix(5))")
        #expect(rewrites.count >= 2, "each rewrite is told: \(rewrites)")
        // After the last rewrite, the events are the log's own. A killed agent's session may commit the statement it
        // was sent after `head` was read: the log is read again until the bridge has delivered all of it.
        let lastRewrite = try #require(rewrites.last)
        var log = try rewriter.events(after: lastRewrite.head)
        for _ in 0..<10 {
            guard let last = log.last?.seq, follower.bridge.waitForDelivery(through: last, timeout: .seconds(30)) else { break }
            let again = try rewriter.events(after: lastRewrite.head)
            if again.count == log.count { break }
            log = again
        }
        let settled = received.values
        let lastMarker = try #require(settled.lastIndex(of: .rewrite(lastRewrite)))
        let tail = settled[(lastMarker + 1)...].compactMap { delivery -> EventRecord? in
            if case .event(let event) = delivery { return event }
            return nil
        }
        #expect(tail.count == log.count && zip(tail, log).allSatisfy { $0.isSameEvent(as: $1) }, "the new history as the log holds it")
        #expect(streamError.wait(seconds: 30) { !$0.isEmpty })
        // The stream ends with a resync signal: the rewrite, or — when the bridge rebased past the stretch the stream
        // still had to read and that stretch's log read came back short under this load — a hole in its history.
        switch streamError.values.first {
        case .historyRewritten?, .historyPruned?: break
        default: Issue.record("the stream ended with \(streamError.values)")
        }
        print(
            "HistoryRewriteStressTests[\(backend)]: \(deliveries.count - rewrites.count) events and \(rewrites.count) rewrites "
                + "delivered (\(rewrites.map { "\($0.after)→\($0.head)" }.joined(separator: ", "))), head \(head)")
    }
}
