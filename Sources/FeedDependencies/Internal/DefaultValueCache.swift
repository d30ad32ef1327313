internal import Foundation

/// Default values already resolved for one ``DependencyValues`` context, shared by all copies
/// of that instance (a class box, so copies made by `withDependencies` share it).
///
/// `@unchecked Sendable`: `values` is read and written only while `lock` (an `NSLock`) is held. An `NSLock` rather
/// than `Synchronization.Mutex`: ThreadSanitizer sees the pthread mutex inside it but not `Mutex`'s futex, and
/// reported this cache's correctly locked accesses as a race in CI.
final class DefaultValueCache: @unchecked Sendable {
    private let lock = NSLock()
    /// Resolved values keyed by `ObjectIdentifier(Key.self)`.
    private var values: [ObjectIdentifier: any Sendable] = [:]

    /// Returns the cached value for `id`, computing it with `make` on first use.
    ///
    /// `make` runs outside the lock (it may resolve other dependencies); if two threads race,
    /// the first stored value wins and both return it.
    func value(for id: ObjectIdentifier, make: () -> any Sendable) -> any Sendable {
        if let cached = lock.withLock({ values[id] }) {
            return cached
        }
        let made = make()
        return lock.withLock {
            if let cached = values[id] {
                return cached
            }
            values[id] = made
            return made
        }
    }
}
