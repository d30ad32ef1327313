import FeedSync
import FeedCore
import FeedDependencies
import FeedDomain
import FeedPublishers
import FeedSQLite
import FeedMigrations
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// No sender (a subject, a subscriber, a callback) is reachable from a durable subscriber.
extension DurableSubscriberHardeningTests {
    // MARK: - No reachable sender

    @Test func walkerFindsPlantedSendersWhereverTheyAreStored() {
        let planted = Planted()
        planted.cycle = planted
        var walker = SenderReachability()
        walker.skip(SkippedHolder.self)
        let report = walker.walk(planted, name: "planted")
        let found = Set(report.findings.map(\.description))
        let expected: Set<String> = [
            "planted.signals: PassthroughPublisher<Signal, Never>",
            "planted.optionalState.some: CurrentValuePublisher<State, Never>",
            "planted.mixed[1]: EventPublisher<FeedError>",
            "planted.mixed[1].subject: PassthroughPublisher<FeedError, Never>",
            "planted.mixed[1].logger: @Sendable (FeedError) -> Void",
            "planted.callbacks[0].value: @Sendable (LikeEvent) -> Void",
            "planted.pending.waiting.sink: any Subscriber<EventRecord, Never>",
            "planted.pending.waiting.sink.receiveValue: @Sendable (EventRecord) -> Void",
            "planted.batch: ([EventRecord]) -> Void",
            "planted.render: @MainActor (State) -> Void",
            "planted.hidden: PassthroughPublisher<EventRecord, Never>",
        ]
        #expect(found == expected, "\(report)")
        #expect(report.skipped == ["planted.skipped"])
        #expect(!report.truncated)
        // The sealed handle and the closure that captures a subject are not senders.
        #expect(!found.contains { $0.hasPrefix("planted.sealed") || $0.hasPrefix("planted.wrapped") })
    }

    @Test(arguments: TestBackend.allCases) func nothingReachableFromADurableSubscriberSends(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let atLeastOnce = DurableSubscriber(name: "outside", service: service, delivery: .atLeastOnce { _ in }, rebuild: { _ in })
        let transactional = DurableSubscriber(name: "inside", service: service, delivery: .transactional { _, _ in })
        try atLeastOnce.start()
        try transactional.start()
        defer {
            atLeastOnce.stop()
            transactional.stop()
        }
        let listeners = [atLeastOnce.signals.sink { _ in }, transactional.signals.sink { _ in }]
        defer { for listener in listeners { listener.cancel() } }

        // FeedService (and the bridge inside it) is checked by its own tests; skipping it keeps this one about
        // the subscriber, whatever the service holds.
        var walker = SenderReachability()
        walker.skip(FeedService.self)
        for (name, subscriber) in [("atLeastOnce", atLeastOnce), ("transactional", transactional)] {
            let report = walker.walk(subscriber, name: name)
            #expect(report.findings.isEmpty, "\(report)")
            #expect(!report.truncated)
            #expect(report.visitedValues > 1)
            let signals: Any = subscriber.signals
            #expect(!(signals is PassthroughPublisher<DurableSubscriber.Signal, Never>))
            #expect(walker.walk(signals, name: "\(name).signals").findings.isEmpty)
        }
    }
}

/// A base class whose stored sender a walk must find through `superclassMirror`.
private class PlantedBase: @unchecked Sendable {
    // `@unchecked Sendable`: never mutated after init except `cycle`, set once before the walk on the test's thread.
    let hidden = PassthroughPublisher<EventRecord, Never>()
}

/// An enum whose payload holds a subscriber.
private enum Pending {
    case idle
    case waiting(id: Int, sink: Subscribers.Sink<EventRecord, Never>)
}

/// A holder the walk is told to skip.
private final class SkippedHolder: Sendable {
    let subject = PassthroughPublisher<EventRecord, Never>()
}

/// Senders stored every way a walk must see, and two ways it must not (a sealed handle, a closure's captures).
private final class Planted: PlantedBase, @unchecked Sendable {
    let signals = PassthroughPublisher<DurableSubscriber.Signal, Never>()
    let optionalState: CurrentValuePublisher<FeedListProjection.State, Never>? = CurrentValuePublisher(
        FeedListProjection.State(viewerID: nil))
    let mixed: [Any] = [1, EventPublisher<FeedError>(), "text"]
    let callbacks: [String: @Sendable (LikeEvent) -> Void] = ["like": { _ in }]
    let pending = Pending.waiting(id: 1, sink: Subscribers.Sink(receiveCompletion: { _ in }, receiveValue: { _ in }))
    let batch: ([EventRecord]) -> Void = { _ in }
    let render: @MainActor (PostDetailProjection.State) -> Void = { _ in }
    let sealed = PassthroughPublisher<EventRecord, Never>().sealed()
    let wrapped: @Sendable (Int) -> Void = { [subject = PassthroughPublisher<EventRecord, Never>()] _ in _ = subject }
    let skipped = SkippedHolder()
    var cycle: Planted?
    let idle = Pending.idle
}
