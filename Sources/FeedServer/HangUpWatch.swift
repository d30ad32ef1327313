internal import CEpoll
internal import FeedDomain
internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#endif

/// Notices at once when a client goes away (`Docs/HTTP.md`, "Threads and who waits on whom").
///
/// libmicrohttpd does not watch a suspended connection's socket, so a client that closes a caught-up stream would keep
/// its slot until the next heartbeat; and its edge-triggered epoll loop misses the end of a request whose last bytes
/// and end arrive together, which would keep that connection until a timeout. This thread waits in `epoll_wait` on
/// every connection's socket for `EPOLLRDHUP` (one-shot). For an event stream it tells the stream, which ends at its
/// next read; for any other connection it shuts the socket's reading side, which wakes libmicrohttpd's loop to read the
/// end (a request that was complete is still answered).
///
/// A socket is added when libmicrohttpd reports the connection started and removed when it reports it closed, which
/// comes before it closes the socket; both, and every use of a socket here, happen under `connections`' lock, so a
/// socket number is never used after its connection is gone (a reused number belongs to a new entry). An epoll entry
/// carries the connection's id, never the socket number.
final class HangUpWatch: Sendable {
    private struct Entry {
        let socket: Int32
        var stream: EventStream?
    }

    private let epoll: Int32
    private let wakeup: Int32
    private let connections = Locked<[Int: Entry]>([:])
    private let nextID = Atomic<Int>(1)

    init?() {
        let epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { return nil }
        let wakeup = eventfd(0, Int32(EFD_CLOEXEC))
        guard wakeup >= 0 else {
            close(epoll)
            return nil
        }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = 0
        guard epoll_ctl(epoll, EPOLL_CTL_ADD, wakeup, &event) == 0 else {
            close(epoll)
            close(wakeup)
            return nil
        }
        self.epoll = epoll
        self.wakeup = wakeup
        let thread = Thread { [self] in run() }
        thread.name = "feedsync-hangups"
        thread.start()
    }

    /// Watches a new connection's socket; returns the id to keep with the connection (0 when the socket is unknown).
    func connectionStarted(socket: Int32) -> Int {
        guard socket >= 0 else { return 0 }
        let id = nextID.wrappingAdd(1, ordering: .relaxed).oldValue
        connections.withLock { connections in
            connections[id] = Entry(socket: socket)
            var event = epoll_event()
            event.events = EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue
            event.data.u64 = UInt64(id)
            _ = epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event)
        }
        return id
    }

    /// The connection `id` now carries `stream`.
    func attach(_ stream: EventStream, to id: Int) {
        connections.withLock { $0[id]?.stream = stream }
    }

    /// Stops watching the connection (libmicrohttpd reports it closed, before it closes the socket).
    func connectionClosed(_ id: Int) {
        connections.withLock { connections in
            guard let entry = connections.removeValue(forKey: id) else { return }
            var event = epoll_event()
            _ = epoll_ctl(epoll, EPOLL_CTL_DEL, entry.socket, &event)
        }
    }

    /// Ends the thread; the descriptors close when the watch is released.
    func stop() {
        var one: UInt64 = 1
        _ = write(wakeup, &one, MemoryLayout<UInt64>.size)
    }

    /// Seconds after the first shutdown at which the reading side is shut again: the end may have come before
    /// libmicrohttpd added the socket to its own epoll set, whose first look then saw only the data.
    private static let repeatedShutdowns: [Double] = [0.05, 0.5, 2]

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        // (when, connection id, pokes left)
        var pokes: [(at: ContinuousClock.Instant, id: Int, next: Int)] = []
        loop: while true {
            let now = ContinuousClock.now
            let timeout = pokes.map { $0.at }.min().map { max(0, Int32(WorkerPool.seconds($0 - now) * 1000) + 1) } ?? -1
            let count = events.withUnsafeMutableBufferPointer { buffer in
                epoll_wait(epoll, buffer.baseAddress, Int32(buffer.count), timeout)
            }
            if count < 0, errno != EINTR { break }
            for index in 0..<max(0, Int(count)) {
                let id = Int(events[index].data.u64)
                if id == 0 { break loop }
                if let stream = poke(id) {
                    stream.hungUp()
                } else {
                    pokes.append((.now + .seconds(Self.repeatedShutdowns[0]), id, 1))
                }
            }
            let due = ContinuousClock.now
            var later: [(at: ContinuousClock.Instant, id: Int, next: Int)] = []
            for entry in pokes {
                guard entry.at <= due else {
                    later.append(entry)
                    continue
                }
                _ = poke(entry.id)
                if entry.next < Self.repeatedShutdowns.count {
                    later.append((due + .seconds(Self.repeatedShutdowns[entry.next]), entry.id, entry.next + 1))
                }
            }
            pokes = later
        }
    }

    /// The connection's stream, or, for a connection without one that is still open, its reading side shut (which
    /// wakes libmicrohttpd's loop for it).
    private func poke(_ id: Int) -> EventStream? {
        connections.withLock { connections -> EventStream? in
            guard let entry = connections[id] else { return nil }
            if entry.stream == nil { shutdown(entry.socket, Int32(SHUT_RD)) }
            return entry.stream
        }
    }

    deinit {
        // Only here, once nothing can use them any more: a number closed earlier could be reused.
        close(epoll)
        close(wakeup)
    }
}
