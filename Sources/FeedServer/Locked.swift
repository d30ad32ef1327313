internal import Foundation

/// A value behind a lock, for state the server's threads share.
///
/// `Synchronization.Mutex` locks with futex calls inside the uninstrumented standard library, which ThreadSanitizer
/// cannot see; the server's own threads and libmicrohttpd's share this state, and its tests run under ThreadSanitizer,
/// so it uses `NSLock` (a pthread mutex, which ThreadSanitizer understands).
///
/// `@unchecked Sendable`: `value` is read and written only with `lock` held.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` with the value, under the lock; `body` must not call out.
    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
