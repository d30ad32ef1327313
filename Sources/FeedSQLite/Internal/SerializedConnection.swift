internal import Foundation

/// A connection used by one thread at a time.
///
/// `@unchecked Sendable`: `connection` is only touched while `lock` is held, and the connection is marked
/// accessible only for the duration of the closure.
final class SerializedConnection: @unchecked Sendable {
    private let lock = NSLock()
    private var connection: Connection?

    init(_ connection: Connection) {
        self.connection = connection
        connection.isAccessible = false
    }

    func withConnection<T>(_ body: (Connection) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        guard let connection else { throw SQLiteError(code: .misuse, message: "the database is closed") }
        precondition(!connection.isAccessible, "API Violation: re-entrant database access from inside its own closure")
        connection.isAccessible = true
        defer { connection.isAccessible = false }
        return try body(connection)
    }

    func close() {
        lock.lock()
        defer { lock.unlock() }
        connection?.isAccessible = true
        connection?.close()
        connection = nil
    }
}
