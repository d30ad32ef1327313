import Synchronization

/// Live values installed once at the program's entry point by
/// ``DependencyValues/prepareLiveValues(_:)``; consulted only in the live context.
final class PreparedLiveValues: Sendable {
    /// The process-wide store.
    static let shared = PreparedLiveValues()

    /// Installed values keyed by `ObjectIdentifier(Key.self)`.
    private let values = Mutex<[ObjectIdentifier: any Sendable]>([:])

    /// The installed value for `id`, if any.
    func value(for id: ObjectIdentifier) -> (any Sendable)? {
        values.withLock { $0[id] }
    }

    /// Installs `newValues`, replacing earlier values for the same keys.
    func install(_ newValues: [ObjectIdentifier: any Sendable]) {
        values.withLock { $0.merge(newValues) { _, new in new } }
    }
}
