internal import CEpoll
internal import Foundation

#if canImport(Glibc)
    internal import Glibc
#endif

/// Notices at once when the client of an event stream goes away (`Docs/HTTP.md`, "Threads and who waits on whom").
///
/// libmicrohttpd does not watch a suspended connection's socket, so a client that closes a caught-up stream would keep
/// its slot until the next heartbeat. This thread waits in `epoll_wait` on every stream's socket for `EPOLLRDHUP`
/// (one-shot) and tells the stream, which ends at its next read. A socket is added when its stream starts and removed
/// when libmicrohttpd finishes the request, before it closes the socket; an epoll entry carries the stream's id, never
/// the socket number, so a reused number can never reach another stream.
final class HangUpWatch: Sendable {
    private let epoll: Int32
    private let wakeup: Int32
    private let hub: StreamHub

    init?(hub: StreamHub) {
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
        self.hub = hub
        let thread = Thread { [self] in run() }
        thread.name = "feedsync-hangups"
        thread.start()
    }

    /// Watches `socket` for the stream `id` (ids start at 1; 0 is the stop signal).
    func add(_ socket: Int32, stream id: Int) {
        guard socket >= 0 else { return }
        var event = epoll_event()
        event.events = EPOLLRDHUP.rawValue | EPOLLONESHOT.rawValue
        event.data.u64 = UInt64(id)
        _ = epoll_ctl(epoll, EPOLL_CTL_ADD, socket, &event)
    }

    /// Stops watching `socket` (before libmicrohttpd closes it).
    func remove(_ socket: Int32) {
        guard socket >= 0 else { return }
        var event = epoll_event()
        _ = epoll_ctl(epoll, EPOLL_CTL_DEL, socket, &event)
    }

    /// Ends the thread; the descriptors close when the watch is released.
    func stop() {
        var one: UInt64 = 1
        _ = write(wakeup, &one, MemoryLayout<UInt64>.size)
    }

    private func run() {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        loop: while true {
            let count = events.withUnsafeMutableBufferPointer { buffer in
                epoll_wait(epoll, buffer.baseAddress, Int32(buffer.count), -1)
            }
            if count < 0 {
                if errno == EINTR { continue }
                break
            }
            for index in 0..<Int(count) {
                let id = Int(events[index].data.u64)
                if id == 0 { break loop }
                hub.stream(id)?.hungUp()
            }
        }
    }

    deinit {
        // Only here, once nothing can call ``remove(_:)`` any more: a number closed earlier could be reused.
        close(epoll)
        close(wakeup)
    }
}
