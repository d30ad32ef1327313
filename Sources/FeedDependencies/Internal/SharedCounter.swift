import Synchronization

/// A counter shared by every copy of the generator that captures it.
final class SharedCounter: Sendable {
    /// The next value to hand out.
    private let counter = Atomic<UInt64>(0)

    /// Returns 0, 1, 2, … across all callers.
    func next() -> UInt64 {
        counter.wrappingAdd(1, ordering: .relaxed).oldValue
    }
}
