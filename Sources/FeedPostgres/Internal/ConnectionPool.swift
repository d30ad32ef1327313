internal import FeedCore
internal import Foundation

/// Up to `capacity` connections to one server, opened on first need and handed out one per call.
///
/// A connection that comes back broken (or still inside a transaction) is closed; since a lost connection usually
/// means the server restarted or the network failed, the idle ones are closed with it, so the next call opens a
/// fresh connection instead of finding another dead one.
///
/// `@unchecked Sendable`: `idle`, `openCount` and `isClosed` are only touched while `condition` (an `NSCondition`,
/// which is its own lock) is held; a connection taken out of `idle` is used by exactly one thread until it is
/// checked in again.
final class ConnectionPool: @unchecked Sendable {
    let capacity: Int
    private let connect: @Sendable () throws(PostgresFailure) -> PostgresConnection
    private let waitLimit: Duration
    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    /// Connections open or being opened, idle or checked out.
    private var openCount = 0
    private var isClosed = false

    init(capacity: Int, waitLimit: Duration, connect: @escaping @Sendable () throws(PostgresFailure) -> PostgresConnection) {
        self.capacity = max(1, capacity)
        self.waitLimit = waitLimit
        self.connect = connect
    }

    /// Runs `body` with a connection of the pool, opening one when none is idle and fewer than `capacity` are open.
    func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try checkOut()
        defer { checkIn(connection) }
        return try body(connection)
    }

    private enum Grant {
        case reuse(PostgresConnection)
        case open
    }

    private func checkOut() throws -> PostgresConnection {
        let deadline = Date(timeIntervalSinceNow: Double(waitLimit.components.seconds) + Double(waitLimit.components.attoseconds) / 1e18)
        let grant: Grant = try {
            condition.lock()
            defer { condition.unlock() }
            while true {
                if isClosed { throw PoolError.closed }
                if let connection = idle.popLast() { return .reuse(connection) }
                if openCount < capacity {
                    openCount += 1
                    return .open
                }
                if !condition.wait(until: deadline) { throw PoolError.exhausted }
            }
        }()
        switch grant {
        case .reuse(let connection): return connection
        case .open:
            do {
                return try connect()
            } catch {
                release(count: 1)
                throw error
            }
        }
    }

    private func checkIn(_ connection: PostgresConnection) {
        if connection.isBroken || !connection.isIdle {
            connection.close()
            let stale: [PostgresConnection] = condition.withLock {
                defer { idle.removeAll() }
                return idle
            }
            stale.forEach { $0.close() }
            release(count: 1 + stale.count)
            return
        }
        let kept = condition.withLock { () -> Bool in
            guard !isClosed else { return false }
            idle.append(connection)
            condition.signal()
            return true
        }
        if !kept {
            connection.close()
            release(count: 1)
        }
    }

    private func release(count: Int) {
        condition.withLock {
            openCount -= count
            condition.broadcast()
        }
    }

    /// Closes the idle connections and refuses later check-outs; checked-out connections close when they come back.
    func close() {
        let connections: [PostgresConnection] = condition.withLock {
            isClosed = true
            defer { idle.removeAll() }
            condition.broadcast()
            return idle
        }
        connections.forEach { $0.close() }
        release(count: connections.count)
    }

    /// Why a connection could not be handed out.
    enum PoolError: Error {
        /// ``ConnectionPool/close()`` was called.
        case closed
        /// Every connection stayed busy for the whole wait.
        case exhausted
    }
}
