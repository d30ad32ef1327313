internal import Synchronization

/// Something a backend noticed that its service's logger should hear of: a lost connection replaced by a new one,
/// a write transaction tried again. Never a secret: messages and fields carry codes and counts, not URLs or SQL
/// values.
package struct BackendNotice: Sendable {
    /// What happened.
    package enum Kind: String, Sendable {
        /// A connection was found lost (a server restart, a reset) and a new one opened in its place.
        case reconnected = "connection.reconnected"
        /// A write transaction failed for a reason that retrying cures (a serialization failure, a deadlock, a batch
        /// to send again) and runs again.
        case writeRetried = "write.retried"
    }

    package let kind: Kind
    package let message: String
    package let fields: [String: String]

    package init(_ kind: Kind, _ message: String, _ fields: [String: String] = [:]) {
        self.kind = kind
        self.message = message
        self.fields = fields
    }
}

/// Where a backend posts its ``BackendNotice``s: the service that owns the backend observes them (its logger).
///
/// Posting runs the observer on the posting thread, holding no lock of this object's; with no observer it costs one
/// uncontended lock.
package final class BackendNotices: Sendable {
    /// The closure sits in a struct: held directly as the mutex's value it would gain a reabstraction thunk at each
    /// `withLock`, and the call chain would grow with every notice posted.
    private struct Observer: Sendable {
        let receive: @Sendable (BackendNotice) -> Void
    }

    private let observer = Mutex<Observer?>(nil)

    package init() {}

    /// Replaces the observer; `nil` removes it.
    package func observe(_ observer: (@Sendable (BackendNotice) -> Void)?) {
        self.observer.withLock { $0 = observer.map(Observer.init) }
    }

    /// Hands `notice` to the observer, if any. `make` runs only when there is one.
    package func post(_ make: @autoclosure () -> BackendNotice) {
        guard let observer = observer.withLock({ $0 }) else { return }
        observer.receive(make())
    }
}
