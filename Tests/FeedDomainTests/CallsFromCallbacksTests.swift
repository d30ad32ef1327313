import FeedCore
import FeedDependencies
@testable import FeedDomain
import FeedPublishers
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// A call means the same wherever it is made — a caller's thread or inside one of the library's callbacks — and
/// subscriber code never runs inside a turn that others wait for (`Docs/Architecture.md`, "Threading contract").
// Blocks: holds a state subscriber on a semaphore and waits for delivery.
@Suite(.ownThreads) struct CallsFromCallbacksTests {
    /// A state subscriber stuck in its callback delays neither the `send` that produced the state nor delivery to
    /// other projections: states are published on the projection's own executor.
    @Test(arguments: TestBackend.allCases) func aSlowStateSubscriberDelaysNeitherSendNorDelivery(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try withDependencies {
            $0.feedClient = .live(service)
        } operation: { () throws in
            let detail = PostDetailProjection(postID: "post1", viewerID: "user1")
            let feed = FeedListProjection(viewerID: "user2")
            detail.send(.load)
            feed.send(.refresh)
            let entered = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let blockedOnce = Box(false)
            let likedStates = LockedLog<Bool>()
            let slow = detail.state.sink { state in
                guard state.liked else { return }
                let first = blockedOnce.withLock { blocked in
                    defer { blocked = true }
                    return !blocked
                }
                if first {
                    entered.signal()
                    _ = release.wait(timeout: .now() + 20)
                }
                likedStates.append(true)
            }
            defer { slow.cancel() }
            detail.send(.like)
            #expect(detail(\.liked))
            #expect(entered.wait(timeout: .now() + 10) == .success, "the subscriber never got the liked state")
            #expect(likedStates.values.isEmpty, "send returned only after the subscriber did")
            // Delivery reaches the other projection while the subscriber is still stuck.
            #expect(service.waitForDelivery(through: detail(\.lastAppliedSeq), timeout: .seconds(10)))
            #expect(feed(\.posts).first { $0.id == "post1" }?.likeCount == 1)
            #expect(likedStates.values.isEmpty)
            release.signal()
            #expect(likedStates.wait { !$0.isEmpty })
        }
    }

    /// `catchUp()` from inside a bridge subscriber runs the pass before it returns, as from any other thread.
    @Test(arguments: TestBackend.allCases) func catchUpFromADeliveryRunsThePassBeforeReturning(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let handled = LockedLog<Int64>()
        let subscriber = DurableSubscriber(
            name: "caught-up-in-a-sink", service: service, delivery: .atLeastOnce { handled.append($0.seq) })
        let answers = LockedLog<String>()
        let sink = service.bridge.changes.sink { event in
            guard event.kind == .liked else { return }
            do {
                let count = try subscriber.catchUp()
                answers.append("\(count > 0) \(handled.values.contains(event.seq))")
            } catch {
                answers.append("\(error)")
            }
        }
        defer { sink.cancel() }
        let result = try service.like(userID: "user1", postID: "post2")
        #expect(service.waitForDelivery(through: try #require(result.seq), timeout: .seconds(10)))
        #expect(answers.values == ["true true"])
        #expect(try subscriber.cursor() == result.seq)
    }

    /// `catchUp()` from inside a write on the same thread (another subscriber's transactional handler) fails at once
    /// with a clear error: its pass would wait for the writer that thread holds.
    @Test(arguments: TestBackend.allCases) func catchUpInsideAWriteFailsAtOnce(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let other = DurableSubscriber(name: "asked-inside", service: service, delivery: .atLeastOnce { _ in })
        let answers = LockedLog<String>()
        let subscriber = DurableSubscriber(
            name: "asking", service: service,
            delivery: .transactional { event, _ in
                guard event.kind == .liked else { return }
                do {
                    answers.append("returned \(try other.catchUp())")
                } catch {
                    answers.append("\(error)")
                }
            })
        let signals = Recorder(subscriber.signals)
        try subscriber.start()
        defer { subscriber.stop() }
        let result = try service.like(userID: "user1", postID: "post1")
        #expect(service.waitForDelivery(through: try #require(result.seq), timeout: .seconds(10)))
        #expect(answers.wait { !$0.isEmpty })
        #expect(answers.values.count == 1)
        #expect(answers.values.allSatisfy { $0.contains("from inside a write transaction") }, "\(answers.values)")
        #expect(try other.cursor() == 0)
        // The handler's answer is recorded inside the pass's transaction: the cursor moves when that commits.
        let seq = try #require(result.seq)
        #expect(signals.wait { $0.contains { if case .caughtUp(let through) = $0 { through >= seq } else { false } } })
        #expect(try subscriber.cursor() == seq)
    }
}
