import Foundation

/// A value behind an `NSLock`, for test bookkeeping.
///
/// Tests use this instead of `Synchronization.Mutex` because ThreadSanitizer sees the pthread
/// mutex inside `NSLock` but not `Mutex`'s futex (see `Docs/Publishers.md`).
final class Locked<Value>: @unchecked Sendable {
    // @unchecked: every access to `value` happens inside `lock` (NSLock).
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
