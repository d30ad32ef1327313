import FeedSync
import FeedCore
@testable import FeedDomain
import FeedPublishers
import FeedTestSupport
import Foundation
import Testing

/// A slow bridge subscriber holds delivery up while commits go on: the events waiting for it stay bounded in memory,
/// and it still gets every seq once, in order, the rest read from the log.
@Suite struct DeliveryBacklogTests {
    @Test(arguments: TestBackend.allCases) func aSlowSinkHoldsAtMostTheLimitInMemoryAndGetsEverySeqOnceInOrder(
        on backend: TestBackend
    ) async throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let logged = AsyncLog<FeedLogEvent>()
        let bridge = EventBridge(deliveryLimit: 100)
        let service = try makeService(at: location, bridge: bridge, logger: { logged.append($0) })
        defer { service.close() }
        // Another service on the same database stands in for another process.
        let other = try FeedService(location: location)
        defer { other.close() }
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        let received = Box<[Int64]>([])
        let subscription = bridge.changes.sink { event in
            if event.seq == 7 { _ = gate.wait(timeout: .now() + 60 * asyncTestSlack) }
            received.withLock { $0.append(event.seq) }
        }
        defer { subscription.cancel() }
        // The sink holds delivery on seq 7 while 300 more events are committed here and 50 by the other connection.
        try await service.like(userID: "user1", postID: "post1")
        let toggles = Array(repeating: LikeCommand(.toggle, userID: "user2", postID: "post2"), count: 50)
        for round in 0..<6 {
            _ = try await service.perform(toggles)
            if round == 2 { _ = try await other.perform(toggles) }
        }
        _ = try await service.publishCommittedEvents()
        let last = try await service.status().lastSeq
        #expect(last == 7 + 350)
        #expect(bridge.bufferedEvents.most <= 100, "held \(bridge.bufferedEvents.most) events")
        try await logged.wait(within: 20, "the fall behind to be logged") { $0.contains { $0.kind == .deliveryFellBehind } }
        gate.signal()
        #expect(await service.waitForDelivery(through: last, timeout: .seconds(60)))
        #expect(received.withLock { $0 } == Array(7...last))
        #expect(bridge.bufferedEvents.now == 0)
        #expect(!logged.values.contains { $0.kind == .deliveryMissedPruned || $0.kind == .deliveryReadFailed })
    }

    /// A subscriber's first batch beyond its queue's bound is read from the log from that batch's first seq: nothing
    /// committed before it subscribed.
    @Test(arguments: TestBackend.allCases) func aFirstBatchBeyondTheLimitIsReadFromItsOwnStart(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let bridge = EventBridge(deliveryLimit: 10)
        let service = try makeService(at: location, bridge: bridge)
        defer { service.close() }
        let received = Box<[Int64]>([])
        let subscription = bridge.changes.sink { event in received.withLock { $0.append(event.seq) } }
        defer { subscription.cancel() }
        let toggles = Array(repeating: LikeCommand(.toggle, userID: "user2", postID: "post2"), count: 20)
        _ = try await service.perform(toggles)  // 7...26, one batch beyond the limit
        #expect(await service.waitForDelivery(through: 26, timeout: .seconds(30)))
        #expect(received.withLock { $0 } == Array(7...26))
        #expect(bridge.bufferedEvents.most == 0)
    }

    /// Closing the service ends the events waiting to be read from its log: delivery goes on with later work instead
    /// of waiting for a database that is gone.
    @Test(arguments: TestBackend.allCases) func closingTheServiceEndsTheEventsWaitingToBeReadFromTheLog(
        on backend: TestBackend
    ) async throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let bridge = EventBridge(deliveryLimit: 10)
        let service = try makeService(at: location, bridge: bridge)
        // The set-up's events (1...6) delivered first, so that the limit counts only what this test commits.
        service.settle()
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        let holding = DispatchSemaphore(value: 0)
        let received = Box<[Int64]>([])
        let subscription = bridge.changes.sink { event in
            if event.seq == 7 {
                holding.signal()
                _ = gate.wait(timeout: .now() + 60 * asyncTestSlack)
            }
            received.withLock { $0.append(event.seq) }
        }
        defer { subscription.cancel() }
        let toggles = Array(repeating: LikeCommand(.toggle, userID: "user2", postID: "post2"), count: 10)
        try await service.like(userID: "user1", postID: "post1")  // 7, held
        // Delivery has taken 7 out of its queue and holds it in the sink: the next ten fit the limit exactly.
        #expect(holding.wait(timeout: .now() + 30 * asyncTestSlack) == .success)
        _ = try await service.perform(toggles)  // 8...17, kept in memory
        _ = try await service.perform(toggles)  // 18...27, beyond the limit: to be read from the log
        // Handed to the sink's queue (as a range) before the service closes.
        #expect(bridge.sequencer.waitForDelivery(through: 27, timeout: .seconds(30)))
        service.close()
        gate.signal()
        #expect(await service.waitForDelivery(through: 27, timeout: .seconds(30)))
        #expect(received.withLock { $0 } == Array(7...17))
    }
}
