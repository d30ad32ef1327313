internal import Foundation

/// A value guarded by a lock.
///
/// Uses `NSLock` (a pthread mutex) rather than `Synchronization.Mutex`, whose futex calls ThreadSanitizer cannot
/// see: the concurrency suites (the HTTP server's included) run under `--sanitize=thread`, and this keeps their reports
/// meaningful.
///
/// `@unchecked Sendable`: `value` is only read or written inside `withLock`, while `lock` is held.
package final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    package init(_ value: Value) {
        self.value = value
    }

    package func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
