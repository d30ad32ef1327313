public import Synchronization

/// The shared engine of every subject: the subscriber list, the completion and the current value.
///
/// The subscriber list is an immutable snapshot (copy-on-write array) replaced on subscribe and
/// cancel; `send` takes one lock to read it, then delivers outside the lock, so subscribers may
/// send, subscribe or cancel from inside their callbacks.
///
/// Current-value subjects keep every subscriber's values in send order, also when a subscriber
/// sends from inside `receive(_:)`: a nested `send` first hands each subscriber the values of the
/// outer sends (on this thread) that have not reached it yet, then its own value. Each
/// subscription remembers the version of the last send offered to it, so the outer loop, when it
/// gets there, skips what was already offered (`SubjectSubscription.deliver`).
///
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
        /// Incremented by every accepted `send`: the send's version. Current-value subscriptions use
        /// it to keep values in send order and never offer one value twice.
        @usableFromInline var version = 0

        init(value: Output?) {
            self.value = value
        }
    }

    @usableFromInline let state: Mutex<State>
    @usableFromInline let replaysValue: Bool
    /// How many subscriptions are attached: `state.conduits.count`, written under the lock whenever the list changes,
    /// so that ``hasSubscribers`` is one atomic load (the bridge asks it after every commit).
    private let subscriberCount = Atomic<Int>(0)

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

    /// Whether any subscription is attached (a send now would reach someone).
    var hasSubscribers: Bool {
        subscriberCount.load(ordering: .acquiring) > 0
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
            guard replaysValue else {
                for conduit in conduits {
                    conduit.deliver(value, version: version, frame: frame)
                }
                return
            }
            withUnsafePointer(to: value) { pointer in
                let sender = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
                frame.pointee.sender = sender
                frame.pointee.version = version
                frame.pointee.value = UnsafeRawPointer(pointer)
                var outer = frame.pointee.previous
                while let enclosing = outer {
                    if enclosing.pointee.sender == sender {
                        // Nested inside another send of this subject on this thread.
                        deliverInSendOrder(value, version: version, to: conduits, frame: frame)
                        return
                    }
                    outer = enclosing.pointee.previous
                }
                for conduit in conduits {
                    conduit.deliver(value, version: version, frame: frame)
                }
            }
        }
    }

    /// A send nested inside another send of this current-value subject: each subscriber first gets
    /// the outer values it has not been offered yet, oldest first, then this one.
    @usableFromInline
    func deliverInSendOrder(
        _ value: Output, version: Int, to conduits: ContiguousArray<Conduit>,
        frame: UnsafeMutablePointer<DeliveryFrame>
    ) {
        let sender = UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
        for conduit in conduits {
            deliverOuterValues(to: conduit, from: frame.pointee.previous, sender: sender, frame: frame)
            conduit.deliver(value, version: version, frame: frame)
        }
    }

    /// Offers `conduit` the value of every send of this subject recorded in `outer` and the frames
    /// it is nested in, outermost first; the conduit skips versions it was already offered and
    /// versions sent before it subscribed.
    private func deliverOuterValues(
        to conduit: Conduit, from outer: UnsafeMutablePointer<DeliveryFrame>?, sender: UnsafeRawPointer,
        frame: UnsafeMutablePointer<DeliveryFrame>
    ) {
        guard let outer else { return }
        deliverOuterValues(to: conduit, from: outer.pointee.previous, sender: sender, frame: frame)
        guard outer.pointee.sender == sender, let pointer = outer.pointee.value else { return }
        // The frame was pushed by this engine's `send`, so the value is an `Output`, alive on that send's stack.
        let value = pointer.assumingMemoryBound(to: Output.self).pointee
        conduit.deliver(value, version: outer.pointee.version, frame: frame)
    }

    @usableFromInline
    func send(completion: Subscribers.Completion<Failure>) {
        let conduits = state.withLock(annotating: self) { state -> ContiguousArray<Conduit>? in
            guard state.completion == nil else { return nil }
            state.completion = completion
            let conduits = state.conduits
            state.conduits = []
            subscriberCount.store(0, ordering: .releasing)
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
            // Sends up to this version were snapshotted without this subscriber.
            conduit.join(after: state.version)
            state.conduits.append(conduit)
            subscriberCount.store(state.conduits.count, ordering: .releasing)
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
                subscriberCount.store(state.conduits.count, ordering: .releasing)
            }
        }
    }
}
