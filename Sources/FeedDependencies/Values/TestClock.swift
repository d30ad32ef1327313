import Synchronization

/// A clock that moves only when told: sleepers wait until ``advance(by:)``, ``advance(to:)`` or
/// ``run()`` moves ``now`` to their deadline.
///
/// ```swift
/// let clock = TestClock()
/// let task = Task { try await clock.sleep(for: .seconds(1)) }
/// // wait until `clock.sleeperCount == 1`
/// await clock.advance(by: .milliseconds(999))   // still asleep
/// await clock.advance(by: .milliseconds(1))     // wakes
/// ```
///
/// Sleepers wake in deadline order (ties in the order they went to sleep), and while a
/// sleeper wakes ``now`` equals its deadline. After each wake-up the clock yields so the woken
/// task can run; a sleep it starts that is due within the same advance is honoured if it is
/// registered before the advance passes its deadline. A sleep whose deadline is not after
/// ``now`` returns at once. A cancelled sleeper throws `CancellationError`.
///
/// The clock resumes sleepers in deadline order; when the sleeping tasks share a serial
/// executor with the test (for example all on the main actor), they also *run* in that order
/// and each sees ``now`` equal to its own deadline. On the concurrent pool, woken tasks run in
/// parallel, so wait for their effects (bounded) before asserting.
public final class TestClock: Clock, Sendable {
    /// Instants of this clock.
    public typealias Instant = VirtualInstant

    /// All mutable state, behind one lock.
    private let state: Mutex<State>

    /// Creates a clock whose ``now`` is `now`.
    public init(now: VirtualInstant = .zero) {
        self.state = Mutex(State(now: now))
    }

    /// The current instant.
    public var now: VirtualInstant {
        state.withLock { $0.now }
    }

    /// Zero: deadlines are honoured exactly.
    public var minimumResolution: Duration {
        .zero
    }

    /// How many tasks are asleep on this clock right now.
    public var sleeperCount: Int {
        state.withLock { $0.waitingCount }
    }

    /// Suspends until the clock has been moved to `deadline`.
    public func sleep(until deadline: VirtualInstant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        guard let id = state.withLock({ $0.begin(deadline: deadline) }) else {
            await Task.yield()
            return
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let action = state.withLock { $0.register(id: id, continuation: continuation) }
                action.run()
            }
        } onCancel: {
            let action = state.withLock { $0.cancel(id: id) }
            action.run()
        }
    }

    /// Moves ``now`` forward by `duration`, waking every sleeper due by then.
    public func advance(by duration: Duration = .zero) async {
        await advance(to: now.advanced(by: duration))
    }

    /// Moves ``now`` forward to `deadline` (never backwards), waking every sleeper due by then
    /// in deadline order.
    public func advance(to deadline: VirtualInstant) async {
        while let continuation = state.withLock({ $0.wakeNext(until: deadline) }) {
            continuation.resume()
            await Self.yieldSeveralTimes()
        }
    }

    /// Advances to each sleeper's deadline in turn until nobody is asleep. Never returns while
    /// some task keeps sleeping in a loop.
    public func run() async {
        await Self.yieldSeveralTimes()
        while let deadline = state.withLock({ $0.earliestDeadline }) {
            await advance(to: deadline)
        }
    }

    /// Gives woken tasks a chance to run before the clock moves on.
    private static func yieldSeveralTimes() async {
        for _ in 0..<10 {
            await Task.yield()
        }
    }
}

extension TestClock {
    /// One sleeping task, from the start of `sleep(until:)` until it is resumed.
    private enum Sleeper {
        /// `sleep` began but has not handed over its continuation yet.
        case pending(deadline: VirtualInstant)
        /// Cancelled before handing over its continuation.
        case cancelled
        /// Asleep until `deadline`.
        case waiting(deadline: VirtualInstant, continuation: CheckedContinuation<Void, any Error>)
    }

    /// What to do with a continuation after leaving the lock.
    private enum ResumeAction {
        /// Nothing.
        case none
        /// Resume normally.
        case wake(CheckedContinuation<Void, any Error>)
        /// Resume by throwing `CancellationError`.
        case cancel(CheckedContinuation<Void, any Error>)

        /// Carries out the action; call it outside the lock.
        func run() {
            switch self {
            case .none: break
            case let .wake(continuation): continuation.resume()
            case let .cancel(continuation): continuation.resume(throwing: CancellationError())
            }
        }
    }

    /// The clock's state machine; every method runs under the lock and only changes state.
    private struct State {
        /// The current instant.
        var now: VirtualInstant
        /// Sleepers by id; ids grow in the order sleeps began.
        var sleepers: [Int: Sleeper] = [:]
        /// The next sleeper id.
        var nextID = 0

        /// Number of sleepers holding a continuation.
        var waitingCount: Int {
            sleepers.values.count { if case .waiting = $0 { true } else { false } }
        }

        /// The earliest deadline among waiting sleepers.
        var earliestDeadline: VirtualInstant? {
            nextDue(until: nil)?.deadline
        }

        /// Starts a sleep; `nil` when `deadline` is already reached.
        mutating func begin(deadline: VirtualInstant) -> Int? {
            guard deadline > now else { return nil }
            let id = nextID
            nextID += 1
            sleepers[id] = .pending(deadline: deadline)
            return id
        }

        /// Hands over the continuation of sleeper `id`.
        mutating func register(id: Int, continuation: CheckedContinuation<Void, any Error>) -> ResumeAction {
            switch sleepers[id] {
            case let .pending(deadline) where deadline > now:
                sleepers[id] = .waiting(deadline: deadline, continuation: continuation)
                return .none
            case .pending, .none, .waiting:
                sleepers[id] = nil
                return .wake(continuation)
            case .cancelled:
                sleepers[id] = nil
                return .cancel(continuation)
            }
        }

        /// Cancels sleeper `id`.
        mutating func cancel(id: Int) -> ResumeAction {
            switch sleepers[id] {
            case let .waiting(_, continuation):
                sleepers[id] = nil
                return .cancel(continuation)
            case .pending:
                sleepers[id] = .cancelled
                return .none
            case .cancelled, .none:
                return .none
            }
        }

        /// Removes the next sleeper due by `deadline` and moves `now` to its deadline; when none
        /// is due, moves `now` to `deadline` and returns `nil`.
        mutating func wakeNext(until deadline: VirtualInstant) -> CheckedContinuation<Void, any Error>? {
            guard let due = nextDue(until: deadline) else {
                if now < deadline { now = deadline }
                return nil
            }
            sleepers[due.id] = nil
            if now < due.deadline { now = due.deadline }
            return due.continuation
        }

        /// The waiting sleeper with the earliest deadline (then the lowest id), optionally only
        /// among those due by `limit`.
        private func nextDue(
            until limit: VirtualInstant?
        ) -> (id: Int, deadline: VirtualInstant, continuation: CheckedContinuation<Void, any Error>)? {
            var best: (id: Int, deadline: VirtualInstant, continuation: CheckedContinuation<Void, any Error>)?
            for (id, sleeper) in sleepers {
                guard case let .waiting(deadline, continuation) = sleeper else { continue }
                if let limit, deadline > limit { continue }
                if let current = best, (current.deadline, current.id) < (deadline, id) { continue }
                best = (id, deadline, continuation)
            }
            return best
        }
    }
}
