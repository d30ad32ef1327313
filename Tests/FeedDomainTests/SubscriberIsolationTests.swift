import FeedSync
import FeedCore
@testable import FeedDomain
import FeedPublishers
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// No bridge subscriber waits for another: each has a queue and an executor of its own, so a slow one falls behind
/// alone and still gets every event, in order.
// Blocks: commands on the test's thread, bounded waits for sinks, a sink that waits to be released.
@Suite(.ownThreads) struct SubscriberIsolationTests {
    /// A sink that holds its first event until another sink has received 30 later ones, each waited for in turn,
    /// does not keep them from it; released, it gets every event, in order. A fast sink that waited for the held one
    /// would get none of them. The fast sink's latencies, alone and beside the held one, are printed: how long a
    /// delivery takes is the benchmark's to measure, not a test's to assert.
    @Test func aSlowSubscriberDoesNotDelayAFastOne() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        defer { service.close() }
        let fast = ArrivalLog()
        let fastSubscription = service.bridge.changes.sink { fast.arrived($0.seq) }
        defer { fastSubscription.cancel() }
        let alone = try Self.latencies(of: fast, service: service, likes: 30)
        #expect(alone.count == 30, "a like did not reach the fast sink within 5 s")

        let release = DispatchSemaphore(value: 0)
        defer { release.signal() }
        let holding = DispatchSemaphore(value: 0)
        let slowSeen = Box<[Int64]>([])
        let slowSubscription = service.bridge.changes.sink { event in
            if slowSeen.withLock({ $0.isEmpty }) {
                holding.signal()
                _ = release.wait(timeout: .now() + 60)  // the slow subscriber's own work: the point of the test
            }
            slowSeen.withLock { $0.append(event.seq) }
        }
        defer { slowSubscription.cancel() }
        let first = try service.status().lastSeq + 1
        let beside = try Self.latencies(of: fast, service: service, likes: 30)
        let last = try service.status().lastSeq
        #expect(holding.wait(timeout: .now() + 10) == .success, "the slow sink never got its first event")
        #expect(beside.count == 30, "the fast sink waited for the held one: \(beside.count) of 30 arrived")
        #expect(slowSeen.withLock { $0 }.isEmpty, "the slow sink went past its first event while held")
        print("fast sink p99: alone \(Self.p99(alone)) ms, beside a held sink \(Self.p99(beside)) ms")

        release.signal()
        #expect(service.waitForDelivery(through: last, timeout: .seconds(30)))
        #expect(slowSeen.withLock { $0 } == Array(first...last))
    }

    /// `waitForDelivery` means every subscriber: while one sink holds an event the others have it, but the wait and
    /// `lastDeliveredSeq` do not pass it. Once that sink is cancelled it gets nothing more and holds nothing up.
    @Test func waitForDeliveryMeansEverySubscriberAndACancelledOneHoldsNothingUp() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        defer { service.close() }
        let fast = ArrivalLog()
        let fastSubscription = service.bridge.changes.sink { fast.arrived($0.seq) }
        defer { fastSubscription.cancel() }
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        let holding = DispatchSemaphore(value: 0)
        let held = Box<[Int64]>([])
        let heldSubscription = service.bridge.changes.sink { event in
            if held.withLock({ $0.isEmpty }) {
                holding.signal()
                _ = gate.wait(timeout: .now() + 30)
            }
            held.withLock { $0.append(event.seq) }
        }
        let first = try #require(try service.like(userID: "user1", postID: "post1").seq)
        #expect(holding.wait(timeout: .now() + 10) == .success)
        #expect(fast.wait(for: first, seconds: 10) != nil, "the fast sink waited for the held one")
        #expect(!service.waitForDelivery(through: first, timeout: .milliseconds(200)))
        #expect(service.bridge.lastDeliveredSeq < first)
        // Cancelled from another thread while it holds the event: the cancel returns once that callback returned.
        let cancelled = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            heldSubscription.cancel()
            cancelled.signal()
        }
        let second = try #require(try service.like(userID: "user2", postID: "post1").seq)
        gate.signal()
        #expect(cancelled.wait(timeout: .now() + 10) == .success)
        let afterCancel = held.withLock { $0 }
        let third = try #require(try service.like(userID: "user3", postID: "post1").seq)
        #expect(fast.wait(for: third, seconds: 10) != nil)
        #expect(service.waitForDelivery(through: third, timeout: .seconds(10)))
        #expect(service.bridge.lastDeliveredSeq >= third)
        #expect(held.withLock { $0 } == afterCancel && afterCancel.first == first && !afterCancel.contains(third))
        #expect(fast.seqs.suffix(3) == [first, second, third])
    }

    /// A feed projection reads a created post on its own queue: while that read is held, another sink gets the
    /// created post's event and the likes after it, and the projection shows the post once the read returns.
    @Test func aFeedProjectionsReadOfACreatedPostHoldsUpNoOtherSubscriber() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        defer { service.close() }
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        let reading = DispatchSemaphore(value: 0)
        var client = FeedClient.live(service)
        client.post = { id, viewer throws(FeedError) in
            if id == "post4" {
                reading.signal()
                _ = gate.wait(timeout: .now() + 30)
            }
            return try service.post(id: id, viewerID: viewer)
        }
        let feed = withDependencies {
            $0.feedClient = client
        } operation: {
            FeedListProjection(viewerID: "user1")
        }
        feed.send(.refresh)
        let fast = ArrivalLog()
        let fastSubscription = service.bridge.changes.sink { fast.arrived($0.seq) }
        defer { fastSubscription.cancel() }
        try service.createPost(id: "post4", authorID: "user1", body: "new")
        #expect(reading.wait(timeout: .now() + 10) == .success, "the feed did not read the created post")
        let like = try #require(try service.like(userID: "user1", postID: "post4").seq)
        #expect(fast.wait(for: like, seconds: 10) != nil, "the sink waited for the feed's read")
        #expect(feed(\.posts).first?.id != "post4")
        gate.signal()
        #expect(service.waitForDelivery(through: like, timeout: .seconds(10)))
        #expect(feed(\.posts).first?.id == "post4" && feed(\.likedPostIDs).contains("post4"))
    }

    /// Four threads commit while subscribers of mixed speeds listen — a fast sink, two slow ones whose queues overflow
    /// their small bound and read the rest from the log, a like sink, a feed projection, a change stream and a sink
    /// that cancels itself midway. Nothing stalls (the watchdog fails the test instead of hanging), every subscriber
    /// gets every event once, in order, the cancelled one nothing after its cancel returned, and the projection ends
    /// equal to the database.
    @Test func committersAndSubscribersOfMixedSpeedsNeverStallAndMissNothing() async throws {
        let dir = TemporaryDirectory()
        let logged = AsyncLog<FeedLogEvent>()
        let service = try makeService(
            at: dir.file("feed.sqlite"), bridge: EventBridge(deliveryLimit: 50), logger: { logged.append($0) })
        defer { service.close() }
        let first = try await service.status().lastSeq + 1
        let watchdog = Watchdog(stallTimeout: .seconds(30))
        let fast = Box<[Int64]>([])
        let slow = Box<[Int64]>([])
        let slower = Box<[Int64]>([])
        let likes = Box(0)
        let cancelled = Box<(seqs: [Int64], afterCancel: Bool)>(([], false))
        let slowWorker = watchdog.register("slow-sink")
        let releaseSlower = DispatchSemaphore(value: 0)
        defer { releaseSlower.signal() }
        var subscriptions: [AnyCancellable] = [
            service.bridge.changes.sink { event in fast.withLock { $0.append(event.seq) } },
            service.bridge.changes.sink { event in
                slowWorker.step("slow sink at \(event.seq)")
                Thread.sleep(forTimeInterval: 0.002)  // a slow subscriber's own work
                slow.withLock { $0.append(event.seq) }
            },
            service.bridge.changes.sink { event in
                // Held on its first event until the committers are done, so that its queue passes its bound.
                if event.seq == first { _ = releaseSlower.wait(timeout: .now() + 60) }
                Thread.sleep(forTimeInterval: 0.005)
                slower.withLock { $0.append(event.seq) }
            },
            service.bridge.likePublisher.sink { _ in likes.withLock { $0 += 1 } },
        ]
        let selfCancelling = Box<AnyCancellable?>(nil)
        selfCancelling.withLock {
            $0 = service.bridge.changes.sink { event in
                let stop = cancelled.withLock { state -> Bool in
                    if state.afterCancel { state.afterCancel = false }  // never reset: a delivery after cancel
                    state.seqs.append(event.seq)
                    return state.seqs.count == 40
                }
                if stop {
                    selfCancelling.withLock { $0 }?.cancel()
                    cancelled.withLock { $0.afterCancel = true }
                }
            }
        }
        let feed = withDependencies {
            $0.feedClient = .live(service)
        } operation: {
            FeedListProjection(viewerID: "user1")
        }
        feed.send(.refresh)
        let stream = Task {
            var seqs: [Int64] = []
            for try await batch in service.changes(after: first - 1) {
                seqs += batch.map(\.seq)
                if seqs.count >= 400 { break }
            }
            return seqs
        }
        for thread in 0..<4 {
            watchdog.spawn("committer-\(thread)") { worker in
                for i in 0..<100 {
                    worker.step("toggle #\(i)")
                    _ = try? service.toggle(userID: "user\(thread % 3 + 1)", postID: "post\((thread + i) % 3 + 1)")
                }
            }
        }
        if case .stalled(let report) = watchdog.waitForWorkers() {
            Issue.record(Comment(rawValue: report))
            Watchdog.abandon([service, feed])
            return
        }
        releaseSlower.signal()
        let last = try await service.status().lastSeq
        #expect(last == first + 399)
        // The slowest sink needs about 2 s for 400 events; the bound is wide for a loaded machine.
        #expect(service.waitForDelivery(through: last, timeout: .seconds(120)), "delivery reached \(service.bridge.lastDeliveredSeq)")
        #expect(service.bridge.lastDeliveredSeq == last)
        let all = Array(first...last)
        #expect(fast.withLock { $0 } == all)
        #expect(slow.withLock { $0 } == all)
        #expect(slower.withLock { $0 } == all)
        #expect(likes.withLock { $0 } == 400)
        let stopped = cancelled.withLock { $0 }
        #expect(stopped.seqs == Array(all.prefix(40)) && stopped.afterCancel, "a delivery after cancel returned")
        #expect(try await value(of: stream, within: 60, "the change stream") == all)
        // The slow sinks' queues went past their bound and read the rest from the log.
        #expect(service.bridge.bufferedEvents.most <= 50)
        #expect(logged.values.contains { $0.kind == .deliveryFellBehind })
        #expect(!logged.values.contains { $0.kind == .deliveryMissedPruned || $0.kind == .deliveryReadFailed })
        let truth = try await service.feedPage(viewerID: "user1")
        #expect(feed(\.posts).map(\.likeCount) == truth.rows.map(\.post.likeCount))
        #expect(feed(\.likedPostIDs) == Set(truth.rows.filter(\.liked).map(\.post.id)))
        subscriptions.removeAll()
    }

    /// Toggles `likes` times, each after the fast sink got the previous one, and returns each toggle's latency in
    /// milliseconds: the fast sink's arrival minus the moment the command returned (0 when it arrived first). A toggle
    /// that does not arrive within 5 s ends the run early.
    private static func latencies(of log: ArrivalLog, service: FeedService, likes: Int) throws -> [Double] {
        var result: [Double] = []
        for _ in 0..<likes {
            let seq = try #require(try service.toggle(userID: "user1", postID: "post1").seq)
            let returned = ContinuousClock.now
            guard let arrival = log.wait(for: seq, seconds: 5) else { break }
            let latency = arrival - returned
            result.append(max(0, Double(latency.components.attoseconds) / 1e15 + Double(latency.components.seconds) * 1e3))
        }
        return result
    }

    /// The 99th percentile (nearest rank); for 30 samples the largest.
    static func p99(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .infinity }
        let rank = Int((0.99 * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(max(rank, 0), sorted.count - 1)]
    }
}

/// When each seq reached a sink; waits are bounded.
final class ArrivalLog: Sendable {
    private let arrivals = Box<[Int64: ContinuousClock.Instant]>([:])
    private let condition = NSCondition()

    /// Records `seq`'s arrival now.
    func arrived(_ seq: Int64) {
        let now = ContinuousClock.now
        condition.lock()
        arrivals.withLock { $0[seq] = now }
        condition.broadcast()
        condition.unlock()
    }

    /// When `seq` arrived, waiting for it at most `seconds`; `nil` if it did not.
    func wait(for seq: Int64, seconds: Double) -> ContinuousClock.Instant? {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let arrival = arrivals.withLock({ $0[seq] }) { return arrival }
            if !condition.wait(until: deadline) { return arrivals.withLock { $0[seq] } }
        }
    }

    /// The seqs that arrived, in arrival order is not kept: sorted.
    var seqs: [Int64] { arrivals.withLock { $0.keys.sorted() } }
}
