import Synchronization

/// Counts values dropped by all iterators of one `AsyncPublisher`.
final class DropCounter: Sendable {
    let count = Atomic<Int>(0)
}
