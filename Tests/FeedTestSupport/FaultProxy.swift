internal import Dispatch
internal import Glibc

/// A loopback TCP proxy that injects network faults between a client and its server, for fault tests.
///
/// Each connection accepted on ``port`` is forwarded byte for byte to a new connection to the upstream server, until
/// the test breaks the network:
/// - ``resetAll()`` aborts every open connection with a TCP reset on both sides, as a crashed peer or a firewall
///   would; connections made afterwards work.
/// - ``blackhole()`` makes the network vanish without a trace: nothing is forwarded and nothing is closed, so each
///   side waits on a connection that looks healthy, as when a NAT or proxy in between drops its state. Those
///   connections stay lost for good; ``heal()`` lets new connections through again.
///
/// The proxy runs on two threads of its own (accept and relay), never on Swift's cooperative pool, so a blocked test
/// cannot starve it. It listens and connects on loopback only. ``resetAll()`` and ``blackhole()`` return once the
/// fault is in place: no byte crosses a reset or lost connection after they return.
///
/// ```swift
/// let proxy = try FaultProxy(upstreamURL: database.url)
/// defer { proxy.close() }
/// let backend = try PostgresBackend(url: proxy.url(replacingPortOf: database.url))
/// proxy.blackhole()  // the backend's next query waits for a reply that never comes
/// ```
public final class FaultProxy: Sendable {
    /// The loopback port the proxy listens on.
    public let port: Int
    private let core: Core
    private let threads: [pthread_t]

    /// Starts a proxy to `upstreamHost:upstreamPort`, listening on a free loopback port.
    ///
    /// - Parameters:
    ///   - upstreamHost: the server's IPv4 loopback address (`localhost` is taken as `127.0.0.1`).
    ///   - upstreamPort: the server's port.
    /// - Throws: ``SetupError`` when the host is not a loopback address or a socket or thread cannot be made.
    public init(upstreamHost: String = "127.0.0.1", upstreamPort: Int) throws(SetupError) {
        let core = try Core(upstreamHost: upstreamHost, upstreamPort: upstreamPort)
        var threads: [pthread_t] = []
        do throws(SetupError) {
            threads.append(try startThread { acceptLoop(core) })
            threads.append(try startThread { Relay(core: core).run() })
        } catch {
            core.stop(joining: threads)
            throw error
        }
        self.core = core
        self.port = core.port
        self.threads = threads
    }

    /// Starts a proxy to the host and port of a `postgresql://` URL (port 5432 when the URL names none).
    ///
    /// - Throws: ``SetupError`` when the URL has no `scheme://host` part or its host is not a loopback address.
    public convenience init(upstreamURL url: String) throws(SetupError) {
        guard let range = hostRange(in: url), !url[range].isEmpty, !url[range].hasPrefix("[") else {
            throw SetupError(description: "FaultProxy: the upstream URL names no IPv4 host")
        }
        let hostPort = url[range]
        guard let colon = hostPort.lastIndex(of: ":") else {
            try self.init(upstreamHost: String(hostPort), upstreamPort: 5432)
            return
        }
        guard let port = Int(hostPort[hostPort.index(after: colon)...]) else {
            throw SetupError(description: "FaultProxy: the upstream URL's port is not a number")
        }
        try self.init(upstreamHost: String(hostPort[..<colon]), upstreamPort: port)
    }

    deinit {
        close()
    }

    // MARK: - API

    /// What the proxy does with connections.
    public enum Mode: Sendable {
        /// New connections are forwarded to the upstream server.
        case forwarding
        /// New connections are accepted and never forwarded; see ``FaultProxy/blackhole()``.
        case blackholed
    }

    /// A proxy could not be started.
    public struct SetupError: Error, CustomStringConvertible {
        /// What failed, with the system's reason.
        public let description: String
    }

    /// Whether new connections are forwarded or blackholed.
    public var mode: Mode { core.state.withLock { $0.mode } }

    /// How many client connections the proxy has accepted, in any mode.
    public var acceptedConnections: Int { core.state.withLock { $0.accepted } }

    /// How many client connections the proxy holds open, forwarding or lost.
    ///
    /// A connection counts until both of its sides are closed; a lost one counts until its client closes it.
    public var openPairs: Int { core.state.withLock { $0.open } }

    /// `url` with its host and port replaced by the proxy's: `127.0.0.1:<port>`.
    ///
    /// The authority is the text between `://` and the next `/`, `?` or `#`; its user info is kept.
    ///
    /// ```swift
    /// proxy.url(replacingPortOf: "postgresql://feedsync:pw@127.0.0.1:5432/db?sslmode=disable")
    /// // "postgresql://feedsync:pw@127.0.0.1:<proxy.port>/db?sslmode=disable"
    /// ```
    public func url(replacingPortOf url: String) -> String {
        guard let range = hostRange(in: url) else {
            preconditionFailure("API Violation: FaultProxy.url(replacingPortOf:) needs a scheme://host URL")
        }
        var replaced = url
        replaced.replaceSubrange(range, with: "127.0.0.1:\(port)")
        return replaced
    }

    /// Aborts every open connection with a TCP reset on both sides; connections made afterwards work.
    ///
    /// Each socket is closed with `SO_LINGER` {1, 0}, so its peer's next read or write fails with `ECONNRESET`
    /// instead of seeing an orderly end of stream. Lost connections are reset too.
    public func resetAll() {
        core.command { $0.resets += 1 }
    }

    /// Stops forwarding without closing anything, for existing and new connections.
    ///
    /// Bytes arriving from either side of an existing connection are read and thrown away, so the sender's kernel
    /// keeps acknowledging them and neither side sees an error or an end of stream. New connections are accepted
    /// but never connected upstream, and what their client sends is thrown away. These connections are lost for
    /// good, even after ``heal()``; when a lost connection's client closes it, the proxy closes the other side.
    public func blackhole() {
        core.command {
            $0.mode = .blackholed
            $0.blackholes += 1
        }
    }

    /// Forwards new connections again; connections lost to ``blackhole()`` stay silent.
    public func heal() {
        core.state.withLock { $0.mode = .forwarding }
    }

    /// Stops accepting, closes every socket and ends the proxy's threads.
    ///
    /// Calling it again does nothing; `deinit` calls it.
    public func close() {
        core.stop(joining: threads)
    }
}

// MARK: - Shared state

/// What the proxy and its two threads share; the threads hold this and not the proxy, so its `deinit` can run.
private final class Core: Sendable {
    let listener: Int32
    let port: Int
    let upstreamAddress: UInt32
    let upstreamPort: UInt16
    /// Wakes the accept thread to end it.
    let acceptWake: WakePipe
    /// Wakes the relay thread for new connections, commands and the end.
    let relayWake: WakePipe
    let state = LockedValue(State())

    init(upstreamHost: String, upstreamPort: Int) throws(FaultProxy.SetupError) {
        var address = in_addr()
        let host = upstreamHost == "localhost" ? "127.0.0.1" : upstreamHost
        guard inet_pton(AF_INET, host, &address) == 1, UInt32(bigEndian: address.s_addr) >> 24 == 127,
            let port = UInt16(exactly: upstreamPort), port != 0
        else {
            throw FaultProxy.SetupError(description: "FaultProxy: the upstream must be an IPv4 loopback address and port")
        }
        upstreamAddress = address.s_addr
        self.upstreamPort = port
        (listener, self.port) = try listenOnLoopback()
        do throws(FaultProxy.SetupError) {
            acceptWake = try WakePipe()
            do throws(FaultProxy.SetupError) {
                relayWake = try WakePipe()
            } catch {
                acceptWake.close()
                throw error
            }
        } catch {
            Glibc.close(listener)
            throw error
        }
    }

    /// Applies `change` and waits until the relay thread has carried it out; does nothing once closed.
    func command(_ change: (inout State) -> Void) {
        let done = DispatchSemaphore(value: 0)
        let queued = state.withLock { state -> Bool in
            guard !state.closed else { return false }
            change(&state)
            state.waiters.append(done)
            return true
        }
        guard queued else { return }
        relayWake.wake()
        done.wait()
    }

    /// Ends both threads and closes every descriptor; only the first call does anything.
    func stop(joining threads: [pthread_t]) {
        let first = state.withLock { state -> Bool in
            defer { state.closed = true }
            return !state.closed
        }
        guard first else { return }
        acceptWake.wake()
        relayWake.wake()
        for thread in threads { pthread_join(thread, nil) }
        // Connections accepted but never taken by the relay (only when its thread failed to start).
        let left = state.withLock { state in
            defer { state.incoming = [] }
            return state.incoming
        }
        for pair in left { pair.close() }
        Glibc.close(listener)
        acceptWake.close()
        relayWake.close()
    }

    /// An upstream address for `connect(2)`.
    var upstream: sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = upstreamPort.bigEndian
        address.sin_addr = in_addr(s_addr: upstreamAddress)
        return address
    }
}

/// The proxy's mutable state, behind ``Core/state``.
private struct State {
    var mode = FaultProxy.Mode.forwarding
    var closed = false
    /// How many times `resetAll()` was called: connections accepted before the latest call are reset.
    var resets = 0
    /// How many times `blackhole()` was called: connections accepted before the latest call are lost.
    var blackholes = 0
    var accepted = 0
    var open = 0
    /// Accepted connections waiting for the relay thread.
    var incoming: [Accepted] = []
    /// Callers of `resetAll()` and `blackhole()` waiting for the relay thread.
    var waiters: [DispatchSemaphore] = []
}

/// A connection handed from the accept thread to the relay thread, with the state it was accepted in.
private struct Accepted: Sendable {
    let client: Int32
    /// `-1` when accepted while blackholed.
    let upstream: Int32
    let resets: Int
    let blackholes: Int

    func close() {
        Glibc.close(client)
        if upstream >= 0 { Glibc.close(upstream) }
    }
}

// MARK: - Accept thread

/// Accepts connections, connects each upstream unless blackholed, and hands the pair to the relay thread.
private func acceptLoop(_ core: Core) {
    while true {
        var fds = [
            pollfd(fd: core.listener, events: Int16(POLLIN), revents: 0),
            pollfd(fd: core.acceptWake.read, events: Int16(POLLIN), revents: 0),
        ]
        guard poll(&fds, 2, -1) >= 0 else {
            precondition(errno == EINTR, "FaultProxy: poll failed with errno \(errno)")
            continue
        }
        if fds[1].revents != 0 { return }
        let client = accept(core.listener, nil, nil)
        guard client >= 0 else {
            // Out of descriptors or buffers: the listener stays readable, so back off instead of spinning.
            if [EMFILE, ENFILE, ENOBUFS, ENOMEM].contains(errno) { _ = poll(&fds[1], 1, 50) }
            continue
        }
        // Glibc's module does not export accept4(2), so the flags are set after accept.
        setNonBlockingAndCloseOnExec(client)
        setNoDelay(client)
        let ticket = core.state.withLock { state -> (mode: FaultProxy.Mode, resets: Int, blackholes: Int)? in
            guard !state.closed else { return nil }
            state.accepted += 1
            return (state.mode, state.resets, state.blackholes)
        }
        guard let ticket else {
            Glibc.close(client)
            return
        }
        var upstream: Int32 = -1
        if ticket.mode == .forwarding {
            upstream = connectUpstream(core)
            guard upstream >= 0 else {
                Glibc.close(client)
                continue
            }
        }
        let pair = Accepted(client: client, upstream: upstream, resets: ticket.resets, blackholes: ticket.blackholes)
        let handed = core.state.withLock { state -> Bool in
            guard !state.closed else { return false }
            state.incoming.append(pair)
            state.open += 1
            return true
        }
        guard handed else {
            pair.close()
            return
        }
        core.relayWake.wake()
    }
}

/// A new non-blocking connection to the upstream server, or `-1` when it fails within two seconds or the proxy
/// closes meanwhile.
private func connectUpstream(_ core: Core) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return -1 }
    var address = core.upstream
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    // A non-blocking connect(2) completes later; poll for writability, then read its outcome from SO_ERROR.
    // https://man7.org/linux/man-pages/man2/connect.2.html (EINPROGRESS)
    if result != 0 {
        guard errno == EINPROGRESS || errno == EINTR else {
            Glibc.close(fd)
            return -1
        }
        var fds = [
            pollfd(fd: fd, events: Int16(POLLOUT), revents: 0),
            pollfd(fd: core.acceptWake.read, events: Int16(POLLIN), revents: 0),
        ]
        var ready: Int32
        repeat { ready = poll(&fds, 2, 2_000) } while ready < 0 && errno == EINTR
        var failure: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard ready > 0, fds[1].revents == 0, getsockopt(fd, SOL_SOCKET, SO_ERROR, &failure, &length) == 0, failure == 0
        else {
            Glibc.close(fd)
            return -1
        }
    }
    setNoDelay(fd)
    return fd
}

// MARK: - Relay thread

/// The relay thread: one poll(2) over its wake pipe and the sockets of every connection it holds.
private final class Relay {
    private let core: Core
    private var links: [Link] = []
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)

    init(core: Core) {
        self.core = core
    }

    deinit {
        scratch.deallocate()
    }

    func run() {
        var fds: [pollfd] = []
        while true {
            fds.removeAll(keepingCapacity: true)
            fds.append(pollfd(fd: core.relayWake.read, events: Int16(POLLIN), revents: 0))
            for link in links { link.register(in: &fds) }
            let ready = poll(&fds, nfds_t(fds.count), -1)
            precondition(ready >= 0 || errno == EINTR, "FaultProxy: poll failed with errno \(errno)")
            if fds[0].revents != 0 { core.relayWake.drain() }
            guard control() else { break }
            if ready > 0 {
                for link in links { link.service(fds, scratch) }
                sweep()
            }
        }
        for link in links { link.close() }
        sweep()
    }

    /// Takes new connections and applies resets and blackholes, then releases the commands' callers; `false` when
    /// the proxy is closing.
    ///
    /// This runs between rounds of I/O, so once a caller is released no byte is forwarded against its command.
    private func control() -> Bool {
        let (closed, resets, blackholes, incoming, waiters) = core.state.withLock { state in
            defer {
                state.incoming = []
                state.waiters = []
            }
            return (state.closed, state.resets, state.blackholes, state.incoming, state.waiters)
        }
        links += incoming.map(Link.init)
        if !closed {
            for link in links {
                if link.resets < resets {
                    link.abort()
                } else if link.blackholes < blackholes {
                    link.loseForever()
                }
            }
        }
        sweep()
        for waiter in waiters { waiter.signal() }
        return !closed
    }

    /// Drops closed links and counts them out of ``State/open``.
    private func sweep() {
        let before = links.count
        links.removeAll { $0.isClosed }
        let closed = before - links.count
        if closed > 0 { core.state.withLock { $0.open -= closed } }
    }
}

/// One client connection and its upstream connection, owned by the relay thread.
private final class Link {
    private var client: Int32
    /// `-1` when there is none (accepted while blackholed) or, for a lost link, when the server closed it.
    private var upstream: Int32
    private var toUpstream = Flow()
    private var toClient = Flow()
    /// Blackholed: everything read is thrown away and nothing is written.
    private var lost: Bool
    /// ``State/resets`` and ``State/blackholes`` when the connection was accepted.
    let resets: Int
    let blackholes: Int
    private var clientSlot = -1
    private var upstreamSlot = -1

    init(_ accepted: Accepted) {
        client = accepted.client
        upstream = accepted.upstream
        lost = accepted.upstream < 0
        resets = accepted.resets
        blackholes = accepted.blackholes
    }

    var isClosed: Bool { client < 0 }

    /// Adds the sockets this link waits on to `fds` and remembers where.
    func register(in fds: inout [pollfd]) {
        clientSlot = -1
        upstreamSlot = -1
        guard !isClosed else { return }
        var clientEvents = Int16(POLLIN)
        var upstreamEvents = Int16(POLLIN)
        if !lost {
            // While a direction has bytes pending, its source is not read: the backlog stays in the kernels.
            clientEvents = (toUpstream.wantsInput ? Int16(POLLIN) : 0) | (toClient.hasPending ? Int16(POLLOUT) : 0)
            upstreamEvents = (toClient.wantsInput ? Int16(POLLIN) : 0) | (toUpstream.hasPending ? Int16(POLLOUT) : 0)
        }
        if clientEvents != 0 {
            clientSlot = fds.count
            fds.append(pollfd(fd: client, events: clientEvents, revents: 0))
        }
        if upstreamEvents != 0 && upstream >= 0 {
            upstreamSlot = fds.count
            fds.append(pollfd(fd: upstream, events: upstreamEvents, revents: 0))
        }
    }

    /// Does the I/O that `fds` (as filled by ``register(in:)``) says is ready.
    func service(_ fds: [pollfd], _ scratch: UnsafeMutableRawBufferPointer) {
        guard !isClosed else { return }
        let clientReady = clientSlot >= 0 && fds[clientSlot].revents != 0
        let upstreamReady = upstreamSlot >= 0 && fds[upstreamSlot].revents != 0
        if lost {
            if clientReady && !discardInput(client, scratch) {
                close()
                return
            }
            if upstreamReady && !discardInput(upstream, scratch) {
                Glibc.close(upstream)
                upstream = -1
            }
            return
        }
        var healthy = true
        if clientReady {
            if toUpstream.wantsInput { healthy = toUpstream.forward(from: client, to: upstream, scratch) }
            if healthy && toClient.hasPending { healthy = toClient.flush(to: client) }
        }
        if healthy && upstreamReady {
            if toClient.wantsInput { healthy = toClient.forward(from: upstream, to: client, scratch) }
            if healthy && toUpstream.hasPending { healthy = toUpstream.flush(to: upstream) }
        }
        if !healthy {
            // One side failed (usually a reset): pass the abort on to the other.
            abort()
        } else if toUpstream.isDone && toClient.isDone {
            close()
        }
    }

    /// Stops forwarding for good: what is pending is dropped and from now on everything read is thrown away.
    func loseForever() {
        lost = true
        toUpstream = Flow()
        toClient = Flow()
    }

    /// Closes both sides with a TCP reset.
    ///
    /// `SO_LINGER` with a zero timeout makes close(2) send RST instead of FIN.
    /// https://man7.org/linux/man-pages/man7/socket.7.html (SO_LINGER)
    func abort() {
        for fd in [client, upstream] where fd >= 0 {
            var option = linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &option, socklen_t(MemoryLayout<linger>.size))
        }
        close()
    }

    /// Closes both sides in order (FIN).
    func close() {
        if client >= 0 { Glibc.close(client) }
        if upstream >= 0 { Glibc.close(upstream) }
        client = -1
        upstream = -1
    }
}

/// One direction of a link: bytes read from its source and not yet written to its destination.
private struct Flow {
    private var pending: [UInt8] = []
    private var written = 0
    private var sourceEnded = false
    /// The source ended and everything was written: the destination was shut down for writing.
    private(set) var isDone = false

    var hasPending: Bool { written < pending.count }
    var wantsInput: Bool { !sourceEnded && !hasPending }

    /// Reads once from `source` and writes what the destination takes; `false` on an error of either side.
    mutating func forward(from source: Int32, to destination: Int32, _ scratch: UnsafeMutableRawBufferPointer) -> Bool {
        let count = recv(source, scratch.baseAddress, scratch.count, 0)
        guard count >= 0 else { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
        guard count > 0 else {
            sourceEnded = true
            finishIfDrained(destination)
            return true
        }
        let sent = sendSome(destination, UnsafeRawBufferPointer(rebasing: scratch[..<count]))
        guard sent >= 0 else { return false }
        if sent < count {
            pending = Array(scratch[sent..<count])
            written = 0
        }
        return true
    }

    /// Writes what the destination takes of the pending bytes; `false` on an error.
    mutating func flush(to destination: Int32) -> Bool {
        let sent = pending.withUnsafeBytes { sendSome(destination, UnsafeRawBufferPointer(rebasing: $0[written...])) }
        guard sent >= 0 else { return false }
        written += sent
        if !hasPending {
            pending = []
            written = 0
            finishIfDrained(destination)
        }
        return true
    }

    /// Passes the end of stream on (half-close) once the source has ended and nothing is pending.
    private mutating func finishIfDrained(_ destination: Int32) {
        guard sourceEnded, !hasPending, !isDone else { return }
        isDone = true
        _ = shutdown(destination, Int32(SHUT_WR))
    }
}

// MARK: - Sockets

/// Sends as much of `bytes` as the socket takes now: the count sent (0 when it is full), or -1 on an error.
///
/// `MSG_NOSIGNAL` turns a write to a closed peer into `EPIPE` instead of `SIGPIPE`.
private func sendSome(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Int {
    guard let base = bytes.baseAddress else { return 0 }
    var total = 0
    while total < bytes.count {
        let sent = send(fd, base + total, bytes.count - total, Int32(MSG_NOSIGNAL))
        if sent >= 0 {
            total += sent
        } else if errno == EAGAIN || errno == EWOULDBLOCK {
            break
        } else if errno != EINTR {
            return -1
        }
    }
    return total
}

/// Reads and throws away what `fd` holds now; `false` at its end of stream or on an error.
private func discardInput(_ fd: Int32, _ scratch: UnsafeMutableRawBufferPointer) -> Bool {
    // Bounded, so that one busy sender cannot hold the relay thread.
    for _ in 0..<16 {
        let count = recv(fd, scratch.baseAddress, scratch.count, 0)
        if count == 0 { return false }
        if count < 0 { return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR }
    }
    return true
}

/// Sets `O_NONBLOCK` and `FD_CLOEXEC` on `fd`.
private func setNonBlockingAndCloseOnExec(_ fd: Int32) {
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    _ = fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) | FD_CLOEXEC)
}

/// Turns Nagle's algorithm off, as libpq does on its own socket, so small messages are not held back.
private func setNoDelay(_ fd: Int32) {
    var on: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
}

/// A non-blocking listening socket on 127.0.0.1 and a free port the kernel picked.
private func listenOnLoopback() throws(FaultProxy.SetupError) -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw systemError("socket") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr = in_addr(s_addr: UInt32(0x7f00_0001).bigEndian)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 && listen(fd, SOMAXCONN) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    guard bound else {
        let error = systemError("bind/listen")
        Glibc.close(fd)
        throw error
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}

/// A non-blocking pipe whose read end a thread polls to be woken.
private struct WakePipe: Sendable {
    let read: Int32
    let write: Int32

    init() throws(FaultProxy.SetupError) {
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { throw systemError("pipe") }
        for end in ends { setNonBlockingAndCloseOnExec(end) }
        read = ends[0]
        write = ends[1]
    }

    /// Makes the read end readable; a full pipe is already readable.
    func wake() {
        var byte: UInt8 = 1
        _ = Glibc.write(write, &byte, 1)
    }

    func drain() {
        var bytes = [UInt8](repeating: 0, count: 64)
        while Glibc.read(read, &bytes, bytes.count) > 0 {}
    }

    func close() {
        Glibc.close(read)
        Glibc.close(write)
    }
}

/// A ``FaultProxy/SetupError`` for a failed system call, with `errno`'s message.
private func systemError(_ call: String) -> FaultProxy.SetupError {
    FaultProxy.SetupError(description: "FaultProxy: \(call) failed: \(String(cString: strerror(errno)))")
}

/// The body of a thread started by ``startThread(_:)``.
private final class ThreadBody: Sendable {
    let run: @Sendable () -> Void

    init(_ run: @escaping @Sendable () -> Void) {
        self.run = run
    }
}

/// Starts a POSIX thread running `body`; the caller joins it.
private func startThread(_ body: @escaping @Sendable () -> Void) throws(FaultProxy.SetupError) -> pthread_t {
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(
        &thread, nil,
        { raw in
            guard let raw else { return nil }
            Unmanaged<ThreadBody>.fromOpaque(raw).takeRetainedValue().run()
            return nil
        }, box)
    guard result == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(box).release()
        throw FaultProxy.SetupError(description: "FaultProxy: pthread_create failed: \(String(cString: strerror(result)))")
    }
    return thread
}

/// The range of `host[:port]` in a `scheme://[userinfo@]host[:port][/…]` URL, or `nil` without `://`.
private func hostRange(in url: String) -> Range<String.Index>? {
    guard let scheme = url.firstRange(of: "://") else { return nil }
    let end = url[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? url.endIndex
    let authority = url[scheme.upperBound..<end]
    let start = authority.lastIndex(of: "@").map { url.index(after: $0) } ?? authority.startIndex
    return start..<end
}
