internal import Dispatch
internal import Glibc

// The threads of a ``FaultProxy``: the accept thread and the relay thread, with the connections the relay owns.

// MARK: - Accept thread

/// Accepts connections, connects each upstream unless blackholed, and hands the pair to the relay thread.
func acceptLoop(_ core: Core) {
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
final class Relay {
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
