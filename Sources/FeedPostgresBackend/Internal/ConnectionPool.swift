internal import FeedCore
internal import Foundation

/// Up to `capacity` connections to one server, opened on first need and handed out one per call.
///
/// Broken connections never reach a caller twice:
/// - An idle connection is looked at before it is handed out: a socket that became readable while idle (the server
///   closed it — a restart, a reset — or sent its last words) is read without blocking, and a connection libpq then
///   finds broken is closed instead of handed out.
/// - A connection that comes back broken (or still inside a transaction) is closed; since a lost connection usually
///   means the server restarted or the network failed, the idle ones are closed with it, so the next call opens a
///   fresh connection instead of finding another dead one. ``discardIdle()`` does the same for the change watch.
/// - A call whose first round trip on a reused connection failed because the connection was gone — the server
///   answered nothing of the call, so nothing of it ran — runs once more on a new connection. A call that got any
///   answer, or whose connection went silent (the response timeout), is not repeated.
/// - The first connection opened after one was found lost is reported (``BackendNotice/Kind/reconnected``).
/// - A connection whose server refused a write as read-only (`25006`: a standby) is closed with the idle ones, so
///   the next call connects again and, with `target_session_attrs=read-write`, finds the primary.
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
    /// A connection was found lost and no new one has been opened since.
    private var lostConnections = 0
    private let notices: BackendNotices

    init(
        capacity: Int, waitLimit: Duration, notices: BackendNotices = BackendNotices(),
        connect: @escaping @Sendable () throws(PostgresFailure) -> PostgresConnection
    ) {
        self.capacity = max(1, capacity)
        self.waitLimit = waitLimit
        self.notices = notices
        self.connect = connect
    }

    /// Runs `body` with a connection of the pool, opening one when none is idle and fewer than `capacity` are open.
    ///
    /// `body` may run twice: when its first round trip on a reused connection found the connection gone (nothing of
    /// it reached the server), it runs again on a new connection.
    func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        var retried = false
        while true {
            let (connection, reused) = try checkOut()
            let answered = connection.answeredRoundTrips
            let value: T
            do {
                value = try body(connection)
            } catch {
                let unanswered = connection.isBroken && !connection.gaveUpWaiting && connection.answeredRoundTrips == answered
                // A server that takes no writes (a standby, or a primary demoted since): its connections go, so the next
                // call connects again — to the new primary, with target_session_attrs=read-write.
                if Self.isNotPrimary(error) { connection.close() }
                checkIn(connection)
                if reused, unanswered, !retried {
                    retried = true
                    continue
                }
                throw error
            }
            checkIn(connection)
            return value
        }
    }

    private static func isNotPrimary(_ error: any Error) -> Bool {
        if let failure = error as? PostgresFailure { return failure.sqlState == "25006" }
        if case .notPrimary = error as? StorageError { return true }
        return false
    }

    private enum Grant {
        case reuse(PostgresConnection)
        case open
    }

    /// A connection for one call, and whether it was idle in the pool (rather than opened for this call).
    private func checkOut() throws -> (PostgresConnection, reused: Bool) {
        while true {
            let (connection, reused) = try checkOutOnce()
            if !reused || !connection.isGoneWhileIdle() { return (connection, reused) }
            connection.close()
            condition.withLock { lostConnections += 1 }
            release(count: 1)
        }
    }

    private func checkOutOnce() throws -> (PostgresConnection, reused: Bool) {
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
        case .reuse(let connection): return (connection, true)
        case .open:
            do {
                let connection = try connect()
                let lost = condition.withLock { () -> Int in
                    defer { lostConnections = 0 }
                    return lostConnections
                }
                if lost > 0 {
                    notices.post(BackendNotice(.reconnected, "a new connection replaces \(lost) lost", ["lost": "\(lost)"]))
                }
                return (connection, false)
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
                if connection.isBroken { lostConnections += 1 }
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

    /// Closes the idle connections (the change watch lost its own: they went through the same network); connections
    /// in use are looked at when they come back.
    func discardIdle() {
        let stale: [PostgresConnection] = condition.withLock {
            lostConnections += idle.count
            defer { idle.removeAll() }
            return idle
        }
        stale.forEach { $0.close() }
        if !stale.isEmpty { release(count: stale.count) }
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
