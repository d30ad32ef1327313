internal import Foundation

/// A value behind an `NSLock`, for test helpers shared between threads. Not `Synchronization.Mutex`: ThreadSanitizer
/// does not see its futex-based lock, and reports the accesses it guards as races.
///
/// `@unchecked Sendable`: `value` is only touched while `lock` is held.
public final class LockedValue<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    /// A lock around `value`.
    public init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value while holding the lock.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
