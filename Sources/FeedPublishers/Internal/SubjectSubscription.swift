import Synchronization

/// The values of `SubjectSubscription.mode`.
private enum Mode {
    static let finite = 0
    static let unlimited = 1
    static let terminated = 2
}

/// One subscriber's link to a subject: its demand, its lifecycle and the delivery fast path.
///
/// Lifecycle (`mode`): `finite` (demand bookkeeping under `demanded`), `unlimited` (no
/// per-value lock), `terminated` (cancelled or completed). Every delivery increments
/// `inflight` before reading `mode`; `cancel()` and completion set `terminated` and then wait
/// until no delivery on another thread is still running, so after `cancel()` returns nothing
/// more reaches the subscriber. Deliveries on the calling thread itself (a subscriber
/// cancelling from inside its own `receive`) are counted through `DeliveryFrames` and not
/// waited for.
final class SubjectSubscription<Downstream: Subscriber>: Subscription, SubjectConduit
where Downstream.Input: Sendable {
    typealias Output = Downstream.Input
    typealias Failure = Downstream.Failure

    private struct Demanded {
        var demand: Subscribers.Demand = .none
        /// Current-value subjects: the subscriber is owed the latest value on its next request.
        var behind: Bool
        /// Whether `receive(subscription:)` has returned; a completion waits for it.
        var handedOver = false
        var pendingCompletion: Subscribers.Completion<Failure>?
    }

    private let downstream: Downstream
    private let core: SubjectCore<Output, Failure>
    private let replays: Bool
    private let mode = Atomic<Int>(Mode.finite)
    private let inflight = Atomic<Int>(0)
    private let lastVersion = Atomic<Int>(-1)
    private let demanded: Mutex<Demanded>

    init(downstream: Downstream, core: SubjectCore<Output, Failure>, replays: Bool) {
        self.downstream = downstream
        self.core = core
        self.replays = replays
        demanded = Mutex(Demanded(behind: replays))
    }

    private var identity: UnsafeRawPointer {
        UnsafeRawPointer(Unmanaged.passUnretained(self).toOpaque())
    }

    // MARK: - Subscription

    func request(_ demand: Subscribers.Demand) {
        // `request(.none)` is a documented no-op (Combine traps).
        guard demand > 0 else { return }
        let catchUp = demanded.withLock(annotating: self) { state -> Bool in
            guard mode.load(ordering: .sequentiallyConsistent) != Mode.terminated else { return false }
            state.demand += demand
            if state.demand == .unlimited {
                _ = mode.compareExchange(
                    expected: Mode.finite, desired: Mode.unlimited, ordering: .sequentiallyConsistent)
            }
            guard replays, state.behind else { return false }
            state.behind = false
            state.demand -= 1
            return true
        }
        if catchUp { deliverLatest() }
    }

    func cancel() {
        guard mode.exchange(Mode.terminated, ordering: .sequentiallyConsistent) != Mode.terminated else { return }
        core.remove(self)
        waitForDeliveriesOnOtherThreads()
    }

    // MARK: - SubjectConduit

    func deliver(_ value: Output, version: Int, frame: UnsafeMutablePointer<DeliveryFrame>) {
        inflight.wrappingAdd(1, ordering: .sequentiallyConsistent)
        defer { inflight.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
        switch mode.load(ordering: .sequentiallyConsistent) {
        case Mode.unlimited:
            if replays && !advance(to: version) { return }
            frame.pointee.current = identity
            _ = downstream.receive(value)
            frame.pointee.current = nil
        case Mode.finite:
            let granted = demanded.withLock(annotating: self) { state -> Bool in
                guard state.demand > 0 else {
                    state.behind = true
                    return false
                }
                state.demand -= 1
                state.behind = false
                return true
            }
            guard granted else { return }
            if replays && !advance(to: version) {
                demanded.withLock(annotating: self) { $0.demand += 1 }
                return
            }
            frame.pointee.current = identity
            let more = downstream.receive(value)
            frame.pointee.current = nil
            addDemand(more)
        default:
            return
        }
    }

    func complete(_ completion: Subscribers.Completion<Failure>) {
        guard mode.exchange(Mode.terminated, ordering: .sequentiallyConsistent) != Mode.terminated else { return }
        waitForDeliveriesOnOtherThreads()
        let deliverNow = demanded.withLock(annotating: self) { state -> Bool in
            guard state.handedOver else {
                state.pendingCompletion = completion
                return false
            }
            return true
        }
        if deliverNow { downstream.receive(completion: completion) }
    }

    /// Called once `receive(subscription:)` has returned; delivers a completion that arrived meanwhile.
    func handOver() {
        let pending = demanded.withLock(annotating: self) { state -> Subscribers.Completion<Failure>? in
            state.handedOver = true
            let pending = state.pendingCompletion
            state.pendingCompletion = nil
            return pending
        }
        if let pending { downstream.receive(completion: pending) }
    }

    // MARK: - Internals

    /// Demand returned from `receive(_:)` is added without catching up (Combine's rule).
    private func addDemand(_ more: Subscribers.Demand) {
        guard more > 0 else { return }
        demanded.withLock(annotating: self) { state in
            state.demand += more
            if state.demand == .unlimited {
                _ = mode.compareExchange(
                    expected: Mode.finite, desired: Mode.unlimited, ordering: .sequentiallyConsistent)
            }
        }
    }

    /// Current-value subjects: delivers the latest value inside `request`, as Combine does.
    private func deliverLatest() {
        guard let (value, version) = core.currentValueAndVersion else { return }
        DeliveryFrames.withFrame { frame in
            inflight.wrappingAdd(1, ordering: .sequentiallyConsistent)
            defer { inflight.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
            guard mode.load(ordering: .sequentiallyConsistent) != Mode.terminated else { return }
            guard advance(to: version) else {
                // A newer value reached the subscriber first; give the demand back.
                demanded.withLock(annotating: self) { $0.demand += 1 }
                return
            }
            frame.pointee.current = identity
            let more = downstream.receive(value)
            frame.pointee.current = nil
            addDemand(more)
        }
    }

    /// Records `version` as delivered if it is newer than the last one; false for stale or repeated values.
    private func advance(to version: Int) -> Bool {
        var last = lastVersion.load(ordering: .relaxed)
        while version > last {
            let (exchanged, original) = lastVersion.compareExchange(
                expected: last, desired: version, ordering: .relaxed)
            if exchanged { return true }
            last = original
        }
        return false
    }

    private func waitForDeliveriesOnOtherThreads() {
        let mine = DeliveryFrames.count(of: self)
        var spins = 0
        while inflight.load(ordering: .sequentiallyConsistent) > mine {
            spins += 1
            DeliveryFrames.pause(spins)
        }
    }
}
