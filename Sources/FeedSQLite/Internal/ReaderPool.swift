internal import Foundation

/// Reader connections opened on demand, up to `capacity`, handed out one per closure.
///
/// `@unchecked Sendable`: `idle`, `openCount` and `isClosed` are only touched while `lock` is held; a connection
/// taken out of `idle` is used by exactly one thread until it is put back; `slots` bounds how many are out.
final class ReaderPool: @unchecked Sendable {
    let capacity: Int
    private let location: Connection.Location
    private let configuration: Configuration
    /// How each reader opens the file: ``Connection/Access/readOnly`` or ``Connection/Access/immutable``.
    private let access: Connection.Access
    private let lock = NSLock()
    private let slots: DispatchSemaphore
    private var idle: [Connection] = []
    private var isClosed = false

    init(location: Connection.Location, configuration: Configuration, capacity: Int, access: Connection.Access = .readOnly) {
        self.location = location
        self.configuration = configuration
        self.access = access
        self.capacity = capacity
        self.slots = DispatchSemaphore(value: capacity)
    }

    func withReader<T, E: Error>(_ body: (Connection) throws(E) -> T) throws -> T {
        precondition(capacity > 0, "API Violation: an in-memory database has no reader connections")
        slots.wait()
        defer { slots.signal() }
        let connection = try checkOut()
        connection.isAccessible = true
        defer {
            connection.isAccessible = false
            checkIn(connection)
        }
        return try body(connection)
    }

    private func checkOut() throws(SQLiteError) -> Connection {
        let reused: Connection? = lock.withLock {
            isClosed ? nil : idle.popLast()
        }
        if let reused { return reused }
        if lock.withLock({ isClosed }) { throw SQLiteError(code: .misuse, message: "the database is closed") }
        let connection = try Connection(location: location, access: access, configuration: configuration)
        connection.isAccessible = false
        return connection
    }

    private func checkIn(_ connection: Connection) {
        let keep = lock.withLock { () -> Bool in
            guard !isClosed else { return false }
            idle.append(connection)
            return true
        }
        if !keep { connection.close() }
    }

    func close() {
        let connections = lock.withLock { () -> [Connection] in
            isClosed = true
            defer { idle.removeAll() }
            return idle
        }
        for connection in connections {
            connection.isAccessible = true
            connection.close()
        }
    }
}
