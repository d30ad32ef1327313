import Synchronization

/// A clock whose sleeps return at once (after a cooperative yield) but move its ``now`` to the
/// deadline, so code that sleeps runs instantly and still sees time pass.
///
/// This is the test value of `continuousClock`: code under test that sleeps never blocks a test
/// that did not bring its own ``TestClock``.
public final class ImmediateClock: Clock, Sendable {
    /// Instants of this clock.
    public typealias Instant = VirtualInstant

    /// The current instant.
    private let current: Mutex<VirtualInstant>

    /// Creates a clock whose ``now`` is `now`.
    public init(now: VirtualInstant = .zero) {
        self.current = Mutex(now)
    }

    /// The current instant: the latest deadline slept until, or the start.
    public var now: VirtualInstant {
        current.withLock { $0 }
    }

    /// Zero: deadlines are honoured exactly.
    public var minimumResolution: Duration {
        .zero
    }

    /// Moves ``now`` to `deadline` (never backwards) and returns; throws `CancellationError` if
    /// the task is cancelled.
    public func sleep(until deadline: VirtualInstant, tolerance: Duration? = nil) async throws {
        try Task.checkCancellation()
        current.withLock { now in
            if now < deadline { now = deadline }
        }
        await Task.yield()
        try Task.checkCancellation()
    }
}
