public import Synchronization

extension Mutex where Value: ~Copyable {
    /// `withLock`, plus the acquire/release that ThreadSanitizer cannot see on its own (see `ThreadSanitizerHooks`).
    ///
    /// `owner` is the object that holds this mutex; its address names the lock for TSan.
    @inlinable
    borrowing func withLock<Result: ~Copyable, E: Error>(
        annotating owner: AnyObject,
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        let token = Unmanaged.passUnretained(owner).toOpaque()
        return try withLock { (value: inout sending Value) throws(E) -> sending Result in
            ThreadSanitizerHooks.acquire(token)
            defer { ThreadSanitizerHooks.release(token) }
            return try body(&value)
        }
    }
}
