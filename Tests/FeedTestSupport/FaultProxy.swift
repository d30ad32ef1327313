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
final class Core: Sendable {
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
struct State {
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
struct Accepted: Sendable {
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
