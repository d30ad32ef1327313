import Synchronization

/// Default values already resolved for one ``DependencyValues`` context, shared by all copies
/// of that instance (a class box, so copies made by `withDependencies` share it).
final class DefaultValueCache: Sendable {
    /// Resolved values keyed by `ObjectIdentifier(Key.self)`.
    private let values = Mutex<[ObjectIdentifier: any Sendable]>([:])

    /// Returns the cached value for `id`, computing it with `make` on first use.
    ///
    /// `make` runs outside the lock (it may resolve other dependencies); if two threads race,
    /// the first stored value wins and both return it.
    func value(for id: ObjectIdentifier, make: () -> any Sendable) -> any Sendable {
        if let cached = values.withLock({ $0[id] }) {
            return cached
        }
        let made = make()
        return values.withLock { values in
            if let cached = values[id] {
                return cached
            }
            values[id] = made
            return made
        }
    }
}
