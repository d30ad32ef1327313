internal import FeedCore
internal import Foundation

/// A polling change watch: ``poll()`` reads `event_log_head` on a dedicated connection (not one of the pool's) and
/// reports whether the last seq moved since the previous poll.
///
/// A failed poll closes the connection and throws ``StorageError/connectionLost(location:reason:)`` (or the mapped
/// failure) once; the next poll connects again. (`LISTEN`/`NOTIFY` will let ``wait(timeout:)`` return `.changed`;
/// until then it returns only `.timedOut` or `.woken`.)
///
/// `@unchecked Sendable`: `connection`, `lastSeen` and `isClosed` are only touched while `lock` is held;
/// `wakeRequested` only while `condition` (an `NSCondition`, its own lock) is held.
final class PostgresChangeWatch: FeedChangeWatch, @unchecked Sendable {
    private let location: String
    private let connect: () throws(StorageError) -> PostgresConnection
    private let lock = NSLock()
    private var connection: PostgresConnection?
    private var lastSeen: Int64?
    private var isClosed = false
    private let condition = NSCondition()
    private var wakeRequested = false

    init(location: String, connect: @escaping () throws(StorageError) -> PostgresConnection) {
        self.location = location
        self.connect = connect
    }

    func poll() throws -> Bool {
        try lock.withLock { () throws(StorageError) -> Bool in
            guard !isClosed else {
                throw .database(DatabaseFailure(backend: PostgresBackend.name, code: "08003", message: "the change watch is closed"))
            }
            let connection: PostgresConnection
            if let open = self.connection {
                connection = open
            } else {
                connection = try connect()
                self.connection = connection
            }
            do throws(PostgresFailure) {
                let seq = try connection.execute("SELECT last_seq FROM event_log_head WHERE id = 1", prepared: true).scalarInt64 ?? 0
                defer { lastSeen = seq }
                return lastSeen != seq
            } catch {
                if error.connectionBroken || connection.isBroken {
                    connection.close()
                    self.connection = nil
                }
                throw error.storageError(location: location)
            }
        }
    }

    func wait(timeout: Duration) -> FeedChangeWake {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        let deadline = Date(timeIntervalSinceNow: max(0, seconds))
        condition.lock()
        defer { condition.unlock() }
        while !wakeRequested {
            if !condition.wait(until: deadline) { break }
        }
        if wakeRequested {
            wakeRequested = false
            return .woken
        }
        return .timedOut
    }

    func wake() {
        condition.withLock {
            wakeRequested = true
            condition.broadcast()
        }
    }

    func close() {
        lock.withLock {
            isClosed = true
            connection?.close()
            connection = nil
        }
    }
}
