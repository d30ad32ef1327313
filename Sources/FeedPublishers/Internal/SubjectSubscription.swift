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
///
/// Current-value subjects: `offered` records the newest send offered to this subscriber, whether
/// its value was delivered or refused for zero demand, as `2 × version + 1` (delivered) or
/// `2 × version` (refused, or sent before the subscriber joined). A send offers a version only
/// if nothing as new was offered before, so a value is never offered twice nor after a newer one;
/// a catch-up on `request` may deliver the version it was refused. The subscriber is *behind*
/// (owed the latest value on its next `request`) exactly when `offered` is even: its newest offer
/// was refused, or it has had nothing yet.
///
/// A catch-up claims its version before it calls `receive`. So that a send on another thread
/// cannot deliver a newer value in between, such a send hands its value to the running catch-up
/// (`handed`), which delivers it after its own, in send order. Sends nested inside this
/// subscriber's own `receive` are delivered at once, as everywhere else.
final class SubjectSubscription<Downstream: Subscriber>: Subscription, SubjectConduit
where Downstream.Input: Sendable {
    typealias Output = Downstream.Input
    typealias Failure = Downstream.Failure

    private struct Demanded {
        var demand: Subscribers.Demand = .none
        /// Whether `receive(subscription:)` has returned; a completion waits for it.
        var handedOver = false
        var pendingCompletion: Subscribers.Completion<Failure>?
    }

    private let downstream: Downstream
    private let core: SubjectCore<Output, Failure>
    private let replays: Bool
    private let mode = Atomic<Int>(Mode.finite)
    private let inflight = Atomic<Int>(0)
    private let offered = Atomic<Int>(0)
    private let demanded: Mutex<Demanded>

    /// Current-value subjects: the values sends on other threads handed to the running catch-ups.
    private let handed = Mutex<[(value: Output, version: Int)]>([])
    /// How many catch-ups run; changed only with `handed`'s lock held, so a send reads it without the lock first and
    /// again under it.
    private let catchUps = Atomic<Int>(0)

    init(downstream: Downstream, core: SubjectCore<Output, Failure>, replays: Bool) {
        self.downstream = downstream
        self.core = core
        self.replays = replays
        demanded = Mutex(Demanded())
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
            guard replays, isBehind else { return false }
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

    /// Current-value subjects: called under the subject's lock as the subscriber joins; sends up
    /// to `version` did not include it.
    func join(after version: Int) {
        offered.store(2 &* version, ordering: .relaxed)
    }

    // MARK: - SubjectConduit

    func deliver(_ value: Output, version: Int, frame: UnsafeMutablePointer<DeliveryFrame>) {
        if replays && handToCatchUp(value, version: version) { return }
        deliverNow(value, version: version, frame: frame)
    }

    @inline(__always)
    private func deliverNow(_ value: Output, version: Int, frame: UnsafeMutablePointer<DeliveryFrame>) {
        inflight.wrappingAdd(1, ordering: .sequentiallyConsistent)
        defer { inflight.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
        switch mode.load(ordering: .sequentiallyConsistent) {
        case Mode.unlimited:
            if replays && !claim(2 &* version &+ 1, ifBelow: 2 &* version) { return }
            frame.pointee.current = identity
            _ = downstream.receive(value)
            frame.pointee.current = nil
        case Mode.finite:
            // Already offered (by a nested send, a catch-up or another thread): not refused again either.
            if replays && offered.load(ordering: .relaxed) >= 2 &* version { return }
            let granted = demanded.withLock(annotating: self) { state -> Bool in
                guard state.demand > 0 else { return false }
                state.demand -= 1
                return true
            }
            guard granted else {
                if replays { _ = claim(2 &* version, ifBelow: 2 &* version) }
                return
            }
            if replays && !claim(2 &* version &+ 1, ifBelow: 2 &* version) {
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

    /// Current-value subjects: the newest offer was refused, or nothing was offered yet (see `offered`).
    private var isBehind: Bool {
        offered.load(ordering: .relaxed) & 1 == 0
    }

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

    /// Current-value subjects: delivers the latest value inside `request`, as Combine does, then
    /// the values that sends on other threads handed over meanwhile.
    private func deliverLatest() {
        DeliveryFrames.withFrame { frame in
            inflight.wrappingAdd(1, ordering: .sequentiallyConsistent)
            defer { inflight.wrappingSubtract(1, ordering: .sequentiallyConsistent) }
            handed.withLock(annotating: self) { _ in _ = catchUps.wrappingAdd(1, ordering: .sequentiallyConsistent) }
            deliverCurrentValue(frame: frame)
            while let values = endCatchUp() {
                for (value, version) in values { deliverNow(value, version: version, frame: frame) }
            }
        }
    }

    private func deliverCurrentValue(frame: UnsafeMutablePointer<DeliveryFrame>) {
        while mode.load(ordering: .sequentiallyConsistent) != Mode.terminated,
            let (value, version) = core.currentValueAndVersion
        {
            // Also delivers the version it was refused (`2 × version`), but not one already delivered.
            if claim(2 &* version &+ 1, ifBelow: 2 &* version &+ 1) {
                frame.pointee.current = identity
                let more = downstream.receive(value)
                frame.pointee.current = nil
                addDemand(more)
                return
            }
            // A send on another thread offered a newer value meanwhile. Delivered: the request
            // is served by it, so give the demand back. Refused: catch up to the newer value.
            guard isBehind else {
                demanded.withLock(annotating: self) { $0.demand += 1 }
                return
            }
        }
    }

    /// The values handed to this catch-up since it began, or `nil` (and the catch-up ends) if none.
    private func endCatchUp() -> [(value: Output, version: Int)]? {
        handed.withLock(annotating: self) { handed in
            guard handed.isEmpty else {
                defer { handed = [] }
                return handed
            }
            catchUps.wrappingSubtract(1, ordering: .sequentiallyConsistent)
            return nil
        }
    }

    /// A send on another thread while a catch-up runs: hands the value to the catch-up, which
    /// delivers it after its own. False when no catch-up runs, or when this thread is inside this
    /// subscriber's `receive` (a nested send, delivered at once).
    private func handToCatchUp(_ value: Output, version: Int) -> Bool {
        guard catchUps.load(ordering: .sequentiallyConsistent) > 0, DeliveryFrames.count(of: self) == 0 else {
            return false
        }
        return handed.withLock(annotating: self) { handed in
            guard catchUps.load(ordering: .sequentiallyConsistent) > 0 else { return false }
            handed.append((value, version))
            return true
        }
    }

    /// Sets `offered` to `mark` if it is below `limit`; false if something at least as new was offered.
    private func claim(_ mark: Int, ifBelow limit: Int) -> Bool {
        var last = offered.load(ordering: .relaxed)
        while last < limit {
            let (exchanged, original) = offered.compareExchange(
                expected: last, desired: mark, ordering: .relaxed)
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
