internal import Foundation

/// A value guarded by a lock.
///
/// Uses `NSLock` (a pthread mutex) rather than `Synchronization.Mutex`, whose futex calls ThreadSanitizer cannot
/// see: the concurrency suites run under `--sanitize=thread`, and this keeps their reports meaningful.
///
/// `@unchecked Sendable`: `value` is only read or written inside `withLock`, while `lock` is held.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
