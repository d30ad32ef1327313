internal import Foundation

/// A connection used by one thread at a time.
///
/// `@unchecked Sendable`: `connection` is only touched while `lock` is held, and the connection is marked
/// accessible only for the duration of the closure; `owner` is only touched while `ownerLock` is held.
final class SerializedConnection: @unchecked Sendable {
    private let lock = NSLock()
    private let ownerLock = NSLock()
    /// The thread inside ``withConnection(_:)``, if any.
    private var owner: pthread_t?

    /// Whether the calling thread is inside ``withConnection(_:)`` (waiting for the lock again would deadlock).
    var isHeldByCurrentThread: Bool {
        ownerLock.lock()
        defer { ownerLock.unlock() }
        guard let owner else { return false }
        return pthread_equal(owner, pthread_self()) != 0
    }
    private var connection: Connection?

    init(_ connection: Connection) {
        self.connection = connection
        connection.isAccessible = false
    }

    func withConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        if isHeldByCurrentThread {
            // The non-recursive lock would block this thread for ever; fail clearly instead.
            throw SQLiteError(
                code: .misuse,
                message: "re-entrant use of the connection from inside its own closure (for example a command run "
                    + "from a transactional handler); use the Connection you were given")
        }
        lock.lock()
        setOwner(pthread_self())
        defer {
            setOwner(nil)
            lock.unlock()
        }
        guard let connection else { throw SQLiteError(code: .misuse, message: "the database is closed") }
        precondition(!connection.isAccessible, "API Violation: re-entrant database access from inside its own closure")
        connection.isAccessible = true
        defer { connection.isAccessible = false }
        return try body(connection)
    }

    private func setOwner(_ thread: pthread_t?) {
        ownerLock.lock()
        owner = thread
        ownerLock.unlock()
    }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        connection?.isAccessible = true
        connection?.close()
        connection = nil
    }
}
