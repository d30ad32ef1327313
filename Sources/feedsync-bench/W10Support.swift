import CEpoll
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// W10's client: `count` `GET /api/events?after=SEQ` streams on non-blocking sockets, all multiplexed by one epoll
/// instance on one reader thread — never a thread per stream.
///
/// The reader opens the streams in batches, the next batch once every stream of the previous one has answered 200
/// with a chunked body, and fails the opening when a batch takes over `batchSeconds` or all of them over
/// `totalSeconds`. It decodes each stream's chunks and SSE framing (`id:`, `event:`, `data:` fields, `:` comments, a
/// blank line ending an event), and checks that each stream's events carry seqs `after+1`, `after+2`, … once each and
/// in order. What the driver waits for is in one ``Tally`` behind a mutex; every change to it is broadcast on a
/// condition.
final class StreamHerd: Sendable {
    /// What the reader has seen so far.
    struct Tally {
        /// Streams that answered 200 with a chunked body.
        var opened = 0
        /// Why opening failed (a refused connection, a status other than 200, the time bound), if it did.
        var openFailure: String?
        /// When each stream received each seq's event (`monotonicNanos()`), by seq.
        var arrivals: [Int64: [UInt64]] = [:]
        /// Events out of order or repeated, named ones (`event: historyPruned`), events without an `id:`.
        var violations = 0
        var firstViolation: String?
        /// Streams that ended: the server ended or closed them, or reading failed.
        var ended = 0
        var firstEnd: String?
        /// Set by ``close()``: the reader closes every socket, then sets `finished`.
        var stopping = false
        var finished = false
    }

    /// The number of streams.
    let count: Int
    private let tally = Mutex(Tally())
    private let condition = NSCondition()
    fileprivate let epoll: Int32
    /// A pipe whose read end is in the epoll set: a byte written to it wakes the reader.
    fileprivate let wake: (read: Int32, write: Int32)

    /// Starts the reader, which opens the streams at once; `tokens` are spread over the streams round robin.
    init(
        port: UInt16, after: Int64, tokens: [String], count: Int, batch: Int, batchSeconds: Double, totalSeconds: Double
    ) throws {
        self.count = count
        epoll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard epoll >= 0 else { throw BenchError("epoll_create1: errno \(errno)") }
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else {
            Glibc.close(epoll)
            throw BenchError("pipe: errno \(errno)")
        }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        wake = (pipeEnds[0], pipeEnds[1])
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = HerdLoop.wakeTag
        epoll_ctl(epoll, EPOLL_CTL_ADD, wake.read, &event)

        let requests = tokens.map { token in
            Array(
                ("GET /api/events?after=\(after) HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer \(token)\r\n"
                    + "Accept: text/event-stream\r\n\r\n").utf8)
        }
        let thread = Thread { [self] in
            var loop = HerdLoop(herd: self, after: after, requests: requests, port: port, batch: batch)
            loop.run(batchSeconds: batchSeconds, totalSeconds: totalSeconds)
        }
        thread.name = "w10-streams"
        thread.start()
    }

    /// Waits at most `timeout` seconds until every stream is open or opening failed; returns the open streams and the
    /// failure, if any.
    func waitOpen(timeout: Double) -> (opened: Int, failure: String?) {
        _ = wait(timeout: timeout) { $0.opened == count || $0.openFailure != nil || $0.finished }
        return tally.withLock { ($0.opened, $0.openFailure) }
    }

    /// Waits at most `timeout` seconds until every stream has received `seq`, or a stream broke the order or ended;
    /// returns the number of streams that have it.
    func waitForSeq(_ seq: Int64, timeout: Double) -> Int {
        _ = wait(timeout: timeout) { ($0.arrivals[seq]?.count ?? 0) >= count || $0.violations > 0 || $0.ended > 0 || $0.finished }
        return tally.withLock { $0.arrivals[seq]?.count ?? 0 }
    }

    /// When each stream received `seq` (`monotonicNanos()`), in no particular order.
    func arrivals(of seq: Int64) -> [UInt64] { tally.withLock { $0.arrivals[seq] ?? [] } }

    /// Violations and ended streams so far, with the first of each.
    func problems() -> (violations: Int, firstViolation: String?, ended: Int, firstEnd: String?) {
        tally.withLock { ($0.violations, $0.firstViolation, $0.ended, $0.firstEnd) }
    }

    /// Waits at most `timeout` seconds until every open stream has ended (after the server stopped); returns how many
    /// have, of how many opened.
    func waitAllEnded(timeout: Double) -> (ended: Int, opened: Int) {
        _ = wait(timeout: timeout) { $0.ended == $0.opened }
        return tally.withLock { ($0.ended, $0.opened) }
    }

    /// Stops the reader, which closes every socket, and waits at most 10 s for it; then closes the epoll instance.
    func close() {
        update { $0.stopping = true }
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
        guard wait(timeout: 10, until: { $0.finished }) else {
            note("w10: the stream reader did not stop within 10 s")
            return  // leaves the descriptors to the reader rather than closing them under it
        }
        Glibc.close(epoll)
        Glibc.close(wake.read)
        Glibc.close(wake.write)
    }

    fileprivate var isStopping: Bool { tally.withLock { $0.stopping } }

    /// Changes the tally and wakes every waiter.
    fileprivate func update(_ change: (inout Tally) -> Void) {
        condition.lock()
        tally.withLock { change(&$0) }
        condition.broadcast()
        condition.unlock()
    }

    /// Waits at most `timeout` seconds for `predicate`; returns its last value.
    private func wait(timeout: Double, until predicate: (Tally) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !tally.withLock({ predicate($0) }) {
            if !condition.wait(until: deadline) { return tally.withLock { predicate($0) } }
        }
        return true
    }
}

/// The reader thread's state: every stream's socket and decoder, and the batch being opened. Only that thread has it.
private struct HerdLoop {
    /// The epoll tag of the wake pipe (streams are tagged with their index).
    static let wakeTag = UInt64.max

    let herd: StreamHerd
    let after: Int64
    let requests: [[UInt8]]
    let port: UInt16
    let batch: Int
    private var batchSeconds = 0.0
    private var totalSeconds = 0.0
    private var streams: [HerdStream] = []
    private var opening = true
    /// When every stream must be open.
    private var openDeadline: UInt64 = 0
    /// The current batch's first stream, its streams that have not answered yet, and when it must be done.
    private var batchFirst = 0
    private var batchWaiting = 0
    private var batchDeadline: UInt64 = 0
    private var report = HerdReport()
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)

    init(herd: StreamHerd, after: Int64, requests: [[UInt8]], port: UInt16, batch: Int) {
        self.herd = herd
        self.after = after
        self.requests = requests
        self.port = port
        self.batch = batch
        streams.reserveCapacity(herd.count)
    }

    /// Opens the streams, then reads them until ``StreamHerd/close()``.
    mutating func run(batchSeconds: Double, totalSeconds: Double) {
        (self.batchSeconds, self.totalSeconds) = (batchSeconds, totalSeconds)
        openDeadline = monotonicNanos() + UInt64(totalSeconds * 1e9)
        var events = [epoll_event](repeating: epoll_event(), count: 1024)
        openNextBatch()
        flush()
        while !herd.isStopping {
            var timeout: Int32 = 1000
            if opening {
                let now = monotonicNanos()
                timeout = batchDeadline > now ? Int32(min(1000, (batchDeadline - now) / 1_000_000 + 1)) : 0
            }
            let ready = epoll_wait(herd.epoll, &events, Int32(events.count), timeout)
            if ready < 0, errno != EINTR {
                report.failure = "epoll_wait: errno \(errno)"
                flush()
                break
            }
            for index in 0..<Int(max(ready, 0)) where events[index].data.u64 != Self.wakeTag {
                handle(Int(events[index].data.u64))
            }
            if opening, batchWaiting == 0 {
                openNextBatch()
            } else if opening, monotonicNanos() > batchDeadline {
                let open = streams.count - batchWaiting
                failOpening(
                    batchDeadline == openDeadline
                        ? "\(open) of \(herd.count) streams open after \(Int(totalSeconds)) s, the bound for opening them all"
                        : "\(open) of \(herd.count) streams open; \(batchWaiting) of the batch from stream \(batchFirst) did "
                            + "not answer 200 within \(Int(batchSeconds)) s")
            }
            flush()
        }
        for stream in streams where !stream.isClosed { Glibc.close(stream.fd) }
        herd.update { $0.finished = true }
    }

    /// Opens the next `batch` streams: non-blocking sockets connecting to the server, watched for writability.
    private mutating func openNextBatch() {
        let first = streams.count
        let last = min(herd.count, first + batch)
        guard first < last else {
            opening = false
            return
        }
        batchDeadline = min(monotonicNanos() + UInt64(batchSeconds * 1e9), openDeadline)
        batchFirst = first
        batchWaiting = last - first
        for index in first..<last {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { return failOpening("stream \(index): socket: errno \(errno)") }
            guard connectToLoopback(fd, port: port) == 0 || errno == EINPROGRESS else {
                Glibc.close(fd)
                return failOpening("stream \(index): connect: errno \(errno)")
            }
            var event = epoll_event()
            event.events = EPOLLOUT.rawValue | EPOLLIN.rawValue | EPOLLRDHUP.rawValue
            event.data.u64 = UInt64(index)
            guard epoll_ctl(herd.epoll, EPOLL_CTL_ADD, fd, &event) == 0 else {
                Glibc.close(fd)
                return failOpening("stream \(index): epoll_ctl: errno \(errno)")
            }
            streams.append(HerdStream(fd: fd, last: after))
        }
    }

    private mutating func failOpening(_ why: String) {
        if report.failure == nil { report.failure = why }
        opening = false
    }

    private mutating func handle(_ index: Int) {
        switch streams[index].phase {
        case .connecting, .requesting: sendRequest(index)
        case .head, .body: receive(index)
        case .closed: break
        }
    }

    /// Writes the stream's request once the connection is up; then watches only for input.
    private mutating func sendRequest(_ index: Int) {
        let fd = streams[index].fd
        if case .connecting = streams[index].phase {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else { return end(index, "connect: errno \(error)", failing: true) }
            streams[index].phase = .requesting(0)
        }
        guard case .requesting(var offset) = streams[index].phase else { return }
        let request = requests[index % requests.count]
        while offset < request.count {
            let sent = request[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0, errno == EAGAIN || errno == EWOULDBLOCK { break }
            guard sent > 0 else { return end(index, "send: errno \(errno)", failing: true) }
            offset += sent
        }
        streams[index].phase = offset < request.count ? .requesting(offset) : .head
        guard offset == request.count else { return }
        var event = epoll_event()
        event.events = EPOLLIN.rawValue | EPOLLRDHUP.rawValue
        event.data.u64 = UInt64(index)
        epoll_ctl(herd.epoll, EPOLL_CTL_MOD, fd, &event)
    }

    /// Reads what the socket has and feeds it to the stream's decoders.
    private mutating func receive(_ index: Int) {
        let fd = streams[index].fd
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
            guard count > 0 else {
                let opened = if case .body = streams[index].phase { true } else { false }
                return end(index, count == 0 ? "closed by the server" : "recv: errno \(errno)", failing: !opened)
            }
            consume(index, buffer[0..<count], at: monotonicNanos())
            if streams[index].isClosed || count < buffer.count { return }
        }
    }

    private mutating func consume(_ index: Int, _ bytes: ArraySlice<UInt8>, at now: UInt64) {
        var body = bytes
        if case .head = streams[index].phase {
            streams[index].head += bytes
            guard let head = headerEnd(streams[index].head) else { return }
            let received = streams[index].head
            let headers = String(decoding: received[..<head], as: UTF8.self)
            let status = head >= 12 ? Int(String(decoding: received[9..<12], as: UTF8.self)) : nil
            guard status == 200 else {
                let text = String(decoding: received.prefix(300), as: UTF8.self)
                return end(index, "answered \(status.map(String.init) ?? "garbage"): \(text)", failing: true)
            }
            guard headers.lowercased().contains("\r\ntransfer-encoding: chunked") else {
                return end(index, "answered 200 without a chunked body", failing: true)
            }
            streams[index].phase = .body
            streams[index].head = []
            batchWaiting -= 1
            report.opened += 1
            body = received[(head + 4)...]
        }
        streams[index].read(body, at: now, index: index, into: &report)
        if streams[index].chunks.finished { end(index, "the stream ended", failing: false) }
    }

    /// Closes the stream; `failing`: it had not opened, so the opening fails.
    private mutating func end(_ index: Int, _ why: String, failing: Bool) {
        Glibc.close(streams[index].fd)
        streams[index].phase = .closed
        if failing {
            failOpening("stream \(index) did not open: \(why)")
        } else {
            report.ended.append("stream \(index): \(why)")
        }
    }

    /// Hands what changed to the tally.
    private mutating func flush() {
        guard !report.isEmpty else { return }
        let report = self.report
        self.report = HerdReport()
        herd.update { tally in
            tally.opened += report.opened
            if tally.openFailure == nil { tally.openFailure = report.failure }
            for (seq, at) in report.arrivals { tally.arrivals[seq, default: []].append(at) }
            tally.violations += report.violations.count
            if tally.firstViolation == nil { tally.firstViolation = report.violations.first }
            tally.ended += report.ended.count
            if tally.firstEnd == nil { tally.firstEnd = report.ended.first }
        }
    }
}
