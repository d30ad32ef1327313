internal import FeedCore
internal import Foundation

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Musl)
    internal import Musl
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// A change watch on a dedicated connection (not one of the pool's) that `LISTEN`s on `feedsync_events`.
///
/// - ``poll()`` reads `event_log_head` and reports whether the last seq moved since the previous poll — the
///   safety net, run after every wake-up and every timeout. On a new connection it runs `LISTEN` first and reads the
///   head afterwards, so a commit announced in between is either in the head it reads or in a notification it
///   keeps.
/// - ``wait(timeout:)`` sleeps in `poll(2)` on the connection's socket and a wake pipe; a notification whose payload
///   (the notifying process's highest committed seq) is beyond the head last read returns `.changed`, others are
///   dropped. Writers send them after their commit, through ``PostgresNotifier``.
/// - A failed poll closes the connection and throws ``StorageError/connectionLost(location:reason:)`` (or the
///   mapped failure) once; the next poll connects and listens again. A connection lost while waiting makes the wait
///   return `.changed`, so that the poll reports the loss at once.
/// - The head read is also the listening connection's ping: it runs at least every poll interval, with a short
///   response deadline (``PostgresOptions/pingDeadline``), so a connection whose server vanished without a FIN or an
///   RST (a partition, a dead host, a proxy whose far side is gone) is given up within seconds, not when the kernel
///   gives up the socket. When the watch loses its connection it tells the backend's pool to close its idle
///   connections (``ConnectionPool/discardIdle()``): they went through the same network, and a follower must not find them dead
///   one by one, each after a full response timeout, once the network is back.
///
/// `@unchecked Sendable`: `connection`, `lastSeen` and `isClosed` are only touched while `lock` is held (which
/// ``wait(timeout:)`` holds while it sleeps); the pipe's descriptors only while `pipeLock` is held, or while `lock`
/// is held and the watch is open (``close()`` takes both). Lock order: `lock` → `pipeLock`.
final class PostgresChangeWatch: FeedChangeWatch, @unchecked Sendable {
    private let location: String
    private let connect: () throws(StorageError) -> PostgresConnection
    /// The backend's pool, told to close its idle connections when the watch loses its own.
    private let pool: ConnectionPool?
    private let lock = NSLock()
    private var connection: PostgresConnection?
    private var lastSeen: Int64?
    private var isClosed = false
    private let pipeLock = NSLock()
    private var wakeReader: Int32
    private var wakeWriter: Int32

    /// A notification is sent after its commit, so the read that follows it sees the commit; but commits made within
    /// the notifier's pause (``PostgresNotifier/minimumSpacing``, 5 ms) wait for its end. Two re-checks, 1 and 3 ms
    /// after a notification, find most of them sooner: each is one head read, where the six of a file notification's
    /// schedule cost a writer with a follower a tenth of its throughput (decision 0027).
    let recheckDelays: [Duration] = [.milliseconds(1), .milliseconds(2)]

    /// The head read of ``poll()``; the comment tells the watch's session apart in `pg_stat_activity`.
    static let headSQL = "SELECT last_seq FROM event_log_head WHERE id = 1 /* feedsync change watch */"

    /// - Throws: ``StorageError/cannotOpen(path:reason:)`` when no wake pipe can be made (out of descriptors).
    /// - Parameter pool: the pool whose idle connections close (``ConnectionPool/discardIdle()``, under the watch's
    ///   lock) whenever the watch's connection could not be opened or failed.
    init(
        location: String, pool: ConnectionPool? = nil, connect: @escaping () throws(StorageError) -> PostgresConnection
    ) throws(StorageError) {
        self.location = location
        self.pool = pool
        self.connect = connect
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            throw .cannotOpen(path: location, reason: "no wake pipe for the change watch: \(String(cString: strerror(errno)))")
        }
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
        wakeReader = descriptors[0]
        wakeWriter = descriptors[1]
    }

    deinit { close() }

    func poll() throws -> Bool {
        try lock.withLock { () throws(StorageError) -> Bool in
            guard !isClosed else {
                throw .database(DatabaseFailure(backend: PostgresBackend.name, code: "08003", message: "the change watch is closed"))
            }
            let connection: PostgresConnection
            if let open = self.connection {
                connection = open
            } else {
                do throws(StorageError) {
                    connection = try connect()
                } catch {
                    pool?.discardIdle()
                    throw error
                }
                do throws(PostgresFailure) {
                    // Before the head is read: a commit announced from now on is seen either way.
                    try connection.executeScript("LISTEN " + PostgresNotifier.channel)
                } catch {
                    connection.close()
                    pool?.discardIdle()
                    throw error.storageError(location: location)
                }
                self.connection = connection
            }
            do throws(PostgresFailure) {
                let seq = try connection.execute(Self.headSQL, prepared: true).scalarInt64 ?? 0
                defer { lastSeen = seq }
                return lastSeen != seq
            } catch {
                if error.connectionBroken || connection.isBroken {
                    connection.close()
                    self.connection = nil
                    pool?.discardIdle()
                }
                throw error.storageError(location: location)
            }
        }
    }

    func wait(timeout: Duration) -> FeedChangeWake {
        let deadline = ContinuousClock.now + max(timeout, .zero)
        lock.lock()
        defer { lock.unlock() }
        guard !isClosed else { return .woken }
        if let connection {
            // Read during the last poll's statement, or the connection died since.
            if connection.isBroken || isNews(connection.notifications()) { return .changed }
        }
        while true {
            var descriptors = [pollfd(fd: wakeReader, events: Int16(POLLIN), revents: 0)]
            if let socket = connection?.socket, socket >= 0 {
                descriptors.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0))
            }
            let remaining = ContinuousClock.now.duration(to: deadline)
            let ready = pollDescriptors(&descriptors, Self.milliseconds(remaining))
            if ready < 0, errno != EINTR { return .timedOut }
            if descriptors[0].revents != 0 {
                drainWakePipe()
                return .woken
            }
            if descriptors.count > 1, descriptors[1].revents != 0, let connection {
                // A connection that failed reports it on the next poll; no notification is lost either way (the
                // head is read again).
                if !connection.consumeInput() || connection.isBroken { return .changed }
                if isNews(connection.notifications()) { return .changed }
            }
            if ContinuousClock.now >= deadline { return .timedOut }
        }
    }

    func wake() {
        pipeLock.withLock {
            guard wakeWriter >= 0 else { return }
            var byte: UInt8 = 1
            // A full pipe already holds a wake-up.
            _ = write(wakeWriter, &byte, 1)
        }
    }

    func close() {
        // Ends a wait in progress on another thread, which holds `lock`.
        wake()
        lock.withLock {
            isClosed = true
            connection?.close()
            connection = nil
            pipeLock.withLock {
                for descriptor in [wakeReader, wakeWriter] where descriptor >= 0 { closeDescriptor(descriptor) }
                wakeReader = -1
                wakeWriter = -1
            }
        }
    }

    /// Whether a notification announces a seq beyond the head last read (under `lock`). A payload that is not a seq
    /// counts as news.
    private func isNews(_ notifications: [PostgresNotification]) -> Bool {
        notifications.contains { notification in
            guard notification.channel == PostgresNotifier.channel else { return false }
            guard let seq = Int64(notification.payload), let lastSeen else { return true }
            return seq > lastSeen
        }
    }

    /// Empties the wake pipe (non-blocking; under `lock`, so the descriptor is open).
    private func drainWakePipe() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeReader, &buffer, buffer.count) > 0 {}
    }

    /// A `poll(2)` timeout: whole milliseconds, rounded up so that a short wait does not become a busy loop.
    private static func milliseconds(_ duration: Duration) -> Int32 {
        guard duration > .zero else { return 0 }
        let (seconds, attoseconds) = duration.components
        let millis = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int32(clamping: millis)
    }
}

/// `poll(2)` (a free function: inside the watch, `poll` is its own method).
private func pollDescriptors(_ descriptors: inout [pollfd], _ milliseconds: Int32) -> Int32 {
    poll(&descriptors, nfds_t(descriptors.count), milliseconds)
}

/// `close(2)`, ignoring the result.
private func closeDescriptor(_ descriptor: Int32) {
    _ = close(descriptor)
}
