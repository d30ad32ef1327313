public import Synchronization

/// The shared engine of every subject: the subscriber list, the completion and the current value.
///
/// The subscriber list is an immutable snapshot (copy-on-write array) replaced on subscribe and
/// cancel; `send` takes one lock to read it, then delivers outside the lock, so subscribers may
/// send, subscribe or cancel from inside their callbacks.
/// `send` is `@inlinable` so that clients specialize it for their `Output` (no per-send generic
/// metadata lookups); the rest stays opaque.
@usableFromInline
final class SubjectCore<Output: Sendable, Failure: Error>: Sendable {
    @usableFromInline
    typealias Conduit = any SubjectConduit<Output, Failure>

    @usableFromInline
    struct State {
        @usableFromInline var conduits: ContiguousArray<Conduit> = []
        @usableFromInline var completion: Subscribers.Completion<Failure>?
        @usableFromInline var value: Output?
        /// Incremented by every accepted `send`; current-value subscriptions use it to skip stale values.
        @usableFromInline var version = 0

        init(value: Output?) {
            self.value = value
        }
    }

    @usableFromInline let state: Mutex<State>
    @usableFromInline let replaysValue: Bool

    init(value: Output?) {
        replaysValue = value != nil
        state = Mutex(State(value: value))
    }

    // MARK: - Reading

    var currentValue: Output? {
        state.withLock(annotating: self) { $0.value }
    }

    /// The current value and its version, or `nil` once completed.
    var currentValueAndVersion: (Output, Int)? {
        state.withLock(annotating: self) { state -> (Output, Int)? in
            guard state.completion == nil, let value = state.value else { return nil }
            return (value, state.version)
        }
    }

    var isCompleted: Bool {
        state.withLock(annotating: self) { $0.completion != nil }
    }

    // MARK: - Sending

    @inlinable
    func send(_ value: Output) {
        let snapshot = state.withLock(annotating: self) { state -> (ContiguousArray<Conduit>, Int)? in
            guard state.completion == nil else { return nil }
            state.version &+= 1
            if replaysValue { state.value = value }
            return (state.conduits, state.version)
        }
        guard let (conduits, version) = snapshot, !conduits.isEmpty else { return }
        DeliveryFrames.withFrame { frame in
            for conduit in conduits {
                conduit.deliver(value, version: version, frame: frame)
            }
        }
    }

    @usableFromInline
    func send(completion: Subscribers.Completion<Failure>) {
        let conduits = state.withLock(annotating: self) { state -> ContiguousArray<Conduit>? in
            guard state.completion == nil else { return nil }
            state.completion = completion
            let conduits = state.conduits
            state.conduits = []
            return conduits
        }
        guard let conduits else { return }
        for conduit in conduits {
            conduit.complete(completion)
        }
    }

    // MARK: - Subscribing

    func subscribe<S: Subscriber>(_ subscriber: S) where S.Input == Output, S.Failure == Failure {
        let conduit = SubjectSubscription(downstream: subscriber, core: self, replays: replaysValue)
        let completion = state.withLock(annotating: self) { state -> Subscribers.Completion<Failure>? in
            if let completion = state.completion { return completion }
            state.conduits.append(conduit)
            return nil
        }
        if let completion {
            subscriber.receive(subscription: EmptySubscription())
            subscriber.receive(completion: completion)
            return
        }
        subscriber.receive(subscription: conduit)
        conduit.handOver()
    }

    func remove(_ conduit: AnyObject) {
        state.withLock(annotating: self) { state in
            if let index = state.conduits.firstIndex(where: { $0 === conduit }) {
                state.conduits.remove(at: index)
            }
        }
    }
}
