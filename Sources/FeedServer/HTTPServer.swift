internal import CMicroHTTPD
package import FeedSync
internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#endif

/// The HTTP server behind `feedsync serve` (`Docs/HTTP.md`), on GNU libmicrohttpd.
///
/// ```swift
/// let server = try HTTPServer(service: service, configuration: configuration) { token in try service.authenticate(token: token) }
/// print("listening on port \(server.port)")
/// // … until a signal:
/// server.stop()
/// ```
///
/// Threading (`Docs/HTTP.md`, "Threads and who waits on whom"): libmicrohttpd runs in epoll mode with a pool of I/O
/// threads, one per core. They parse requests, answer what needs no database, and run the event streams' readers,
/// which copy shared bytes and suspend the connection when there is nothing to send; they never wait for the database.
/// Routes that read or write it run on a bounded ``WorkerPool`` while their connection is suspended. The fan-out
/// thread (``StreamHub``) reads each commit from the log once for every stream; the hang-up watch closes the streams of
/// clients that went away. The server's one bridge sink only records the seq and wakes the fan-out.
package final class HTTPServer: Sendable {
    /// Maps a bearer token to its user id; `nil` for a token that is unknown or revoked.
    package typealias Authenticator = @Sendable (String) throws(FeedError) -> String?

    /// The port the server listens on (the one picked when the configuration asked for port 0).
    package let port: UInt16
    /// How long ``stop()`` lets requests in flight finish before it closes their connections.
    package static let drainTimeout: Double = 10

    private let core: ServerCore
    private let running: Mutex<Running?>

    /// What the running daemon holds; taken once by ``stop()`` (or `deinit`).
    ///
    /// `@unchecked Sendable` (the daemon pointer): it lives in the `running` mutex until one caller takes it out,
    /// under that lock, and only that caller's thread uses it afterwards.
    private struct Running: @unchecked Sendable {
        let daemon: OpaquePointer
        let subscription: AnyCancellable
    }

    /// Starts serving `service` on `configuration.host`/`configuration.port`.
    ///
    /// - Parameters:
    ///   - service: the open database; the caller keeps it open (and its ``FeedService/run()`` going, so other
    ///     processes' commits reach the event streams) until after ``stop()``.
    ///   - configuration: address and limits.
    ///   - authenticator: the acting user of a bearer token.
    /// - Throws: ``HTTPServerError`` when the address is not a literal IP address or cannot be listened on.
    package init(
        service: FeedService, configuration: ServerConfiguration, authenticator: @escaping Authenticator
    ) throws(HTTPServerError) {
        let address = try SocketAddress(host: configuration.host, port: configuration.port)
        let lastSeq: Int64
        do {
            lastSeq = try service.backend.readOnce { tx in try tx.lastSeq() }
        } catch {
            throw .database(FeedError.wrap(error))
        }
        let ioThreads = configuration.ioThreads > 0 ? configuration.ioThreads : max(1, ProcessInfo.processInfo.activeProcessorCount)
        let connectionLimit = Self.connectionLimit(configuration, ioThreads: ioThreads)
        Self.raiseOpenFileLimit(to: connectionLimit + 256)
        let core = ServerCore(service: service, configuration: configuration, authenticator: authenticator, lastSeq: lastSeq)
        // One subscriber for the whole server, on its own queue: it only records the seq, or that the bridge found the
        // log rewritten (before any event of the new history), and wakes the fan-out.
        let hub = core.hub
        let subscription = service.bridge.subscribe(
            deliver: { event in hub.noteCommitted(event.seq) }, rewritten: { _ in hub.checkForRewrite() })
        // Retained for libmicrohttpd's callbacks until after MHD_stop_daemon (``stop()``) or the failed start.
        let context = Unmanaged.passRetained(core).toOpaque()
        var failure: Int32 = 0
        let daemon = address.withSockaddr { sockaddr in
            Self.startDaemon(
                configuration, ioThreads: ioThreads, connectionLimit: connectionLimit, ipv6: address.isIPv6, sockaddr: sockaddr,
                context: context, failure: &failure)
        }
        guard let daemon else {
            Unmanaged<ServerCore>.fromOpaque(context).release()
            subscription.cancel()
            core.hub.stop()
            core.hangUps?.stop()
            _ = core.workers.shutdown(until: Date(timeIntervalSinceNow: 1))
            throw HTTPServerError(listening: configuration.host, port: configuration.port, errno: failure)
        }
        self.core = core
        port = feedsync_mhd_bound_port(daemon)
        running = Mutex(Running(daemon: daemon, subscription: subscription))
    }

    deinit {
        // Never waits: a server released without ``stop()`` is stopped the same way on a thread of its own.
        guard let running = running.withLock({ $0.take() }) else { return }
        let core = core
        Thread.detachNewThread { Self.stop(running, core: core) }
    }

    /// Stops the server: stops accepting connections, ends every event stream, lets the requests in flight finish
    /// (up to ``drainTimeout`` seconds), then closes every connection. Requests that arrive meanwhile on open
    /// connections get 503. Calling it again does nothing.
    package func stop() {
        guard let running = running.withLock({ $0.take() }) else { return }
        Self.stop(running, core: core)
    }

    private static func stop(_ running: Running, core: ServerCore) {
        // Stop accepting; the listening socket is ours to close once the daemon no longer uses it.
        let listener = MHD_quiesce_daemon(running.daemon)
        core.beginStopping()
        running.subscription.cancel()
        // Every stream is resumed and ends; the jobs in flight finish (the queued ones answer 503) and resume theirs.
        core.hub.stop()
        let deadline = Date(timeIntervalSinceNow: Self.drainTimeout)
        let drained = core.workers.shutdown(until: deadline)
        // libmicrohttpd must not be stopped with a connection still suspended: wait (bounded) until every request,
        // streams included, was completed after its resume.
        let settled = Date(timeIntervalSinceNow: 2)
        while core.requestsInFlight > 0, Date() < max(settled, drained ? settled : deadline) {
            usleep(2_000)
        }
        core.hangUps?.stop()
        guard drained else {
            // A worker still waits for the database with its connection suspended; stopping libmicrohttpd now would be
            // undefined behaviour, so the daemon is left to the process's exit.
            core.log(.warning, "requests still running after \(Int(Self.drainTimeout)) s; the server stops without closing them")
            if listener >= 0 { close(listener) }
            return
        }
        MHD_stop_daemon(running.daemon)
        if listener >= 0 { close(listener) }
        Unmanaged.passUnretained(core).release()
    }

    /// libmicrohttpd's connection limit: streams plus other connections, with room for an uneven spread over the I/O
    /// threads (each takes its share of the limit).
    static func connectionLimit(_ configuration: ServerConfiguration, ioThreads: Int) -> Int {
        let total = max(1, configuration.maximumStreams + configuration.maximumRequestConnections)
        return ioThreads > 1 ? total + total / 8 : total
    }

    /// Raises the soft limit of open files towards `wanted` (at most the hard limit): every connection is a socket.
    static func raiseOpenFileLimit(to wanted: Int) {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(wanted) else { return }
        limit.rlim_cur = min(rlim_t(wanted), limit.rlim_max)
        _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    // MARK: - Starting libmicrohttpd

    /// `MHD_start_daemon_va` with an `MHD_OPTION_ARRAY` (Swift cannot call the variadic `MHD_start_daemon`).
    /// `sockaddr` and the option array need to live only during the call: libmicrohttpd binds before it returns.
    private static func startDaemon(
        _ configuration: ServerConfiguration, ioThreads: Int, connectionLimit: Int, ipv6: Bool, sockaddr: UnsafeMutableRawPointer,
        context: UnsafeMutableRawPointer, failure: inout Int32
    ) -> OpaquePointer? {
        // epoll with a pool of I/O threads; suspended connections (the event streams, requests waiting for a worker)
        // leave the poll set until they are resumed through the inter-thread channel.
        var flags = MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ITC.rawValue
        flags |= MHD_USE_ERROR_LOG.rawValue
        if ipv6 { flags |= MHD_USE_IPv6.rawValue }
        let logger: MHD_LogCallback = { context, format, arguments in
            let saved = errno  // the start's failure is read from errno after the call
            defer { errno = saved }
            guard let context, let format, let arguments else { return }
            var line = [CChar](repeating: 0, count: 512)
            _ = vsnprintf(&line, line.count, format, arguments)
            let message = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            Unmanaged<ServerCore>.fromOpaque(context).takeUnretainedValue().log(
                .warning, message.trimmingCharacters(in: .whitespacesAndNewlines))
        }
        let completed: MHD_RequestCompletedCallback = { context, connection, contextSlot, _ in
            guard let context else { return }
            Unmanaged<ServerCore>.fromOpaque(context).takeUnretainedValue().requestCompleted(connection, contextSlot)
        }
        let connections: MHD_NotifyConnectionCallback = { context, connection, socketContext, code in
            guard let context, let connection else { return }
            let core = Unmanaged<ServerCore>.fromOpaque(context).takeUnretainedValue()
            // MHD_CONNECTION_NOTIFY_STARTED is 0, MHD_CONNECTION_NOTIFY_CLOSED 1.
            if code.rawValue == 0 {
                core.connectionStarted(connection, socketContext: socketContext)
            } else {
                core.connectionClosed(connection, socketContext: socketContext)
            }
        }
        let handler: MHD_AccessHandlerCallback = { context, connection, url, method, _, upload, uploadSize, contextSlot in
            guard let context, let connection, let url, let method, let uploadSize, let contextSlot else { return .NO }
            return Unmanaged<ServerCore>.fromOpaque(context).takeUnretainedValue().handle(
                connection, path: String(cString: url), method: String(cString: method), upload: upload,
                uploadSize: uploadSize, contextSlot: contextSlot)
        }
        let perAddress = configuration.maximumConnectionsPerAddress
        // Two-pointer options carry the function in `value` and its closure in `ptr_value`.
        var options: [MHD_OptionItem] = [
            MHD_OptionItem(option: MHD_OPTION.EXTERNAL_LOGGER, value: unsafeBitCast(logger, to: Int.self), ptr_value: context),
            MHD_OptionItem(option: MHD_OPTION.THREAD_POOL_SIZE, value: ioThreads, ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_LIMIT, value: connectionLimit, ptr_value: nil),
            // Over the per-address limit a request gets 503; 16 connections further, libmicrohttpd refuses at accept.
            MHD_OptionItem(option: MHD_OPTION.PER_IP_CONNECTION_LIMIT, value: perAddress > 0 ? perAddress + 16 : 0, ptr_value: nil),
            MHD_OptionItem(
                option: MHD_OPTION.CONNECTION_TIMEOUT, value: min(configuration.headerTimeout, configuration.idleTimeout), ptr_value: nil),
            // Each connection's memory pool holds its request headers and its response buffer; it is resident for as
            // long as the connection is open, so it is what an idle event stream costs.
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_MEMORY_LIMIT, value: configuration.maximumHeaders, ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.LISTEN_BACKLOG_SIZE, value: 4096, ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.NOTIFY_COMPLETED, value: unsafeBitCast(completed, to: Int.self), ptr_value: context),
            MHD_OptionItem(option: MHD_OPTION.NOTIFY_CONNECTION, value: unsafeBitCast(connections, to: Int.self), ptr_value: context),
            MHD_OptionItem(option: MHD_OPTION.SOCK_ADDR, value: 0, ptr_value: sockaddr),
            MHD_OptionItem(option: MHD_OPTION.END, value: 0, ptr_value: nil),
        ]
        let daemon = options.withUnsafeMutableBufferPointer { array -> OpaquePointer? in
            guard let items = array.baseAddress else { return nil }
            return withVaList([Int32(MHD_OPTION.ARRAY.rawValue), items, Int32(MHD_OPTION.END.rawValue)]) { arguments in
                MHD_start_daemon_va(flags, configuration.port, nil, nil, handler, context, arguments)
            }
        }
        if daemon == nil { failure = errno }
        return daemon
    }
}

/// Why ``HTTPServer`` could not start.
package enum HTTPServerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The host is not a literal IPv4 or IPv6 address.
    case invalidAddress(String)
    /// Another socket listens on the address.
    case addressInUse(host: String, port: UInt16)
    /// Listening failed otherwise; `reason` is the system's.
    case cannotListen(host: String, port: UInt16, reason: String)
    /// The database could not be read.
    case database(FeedError)

    init(listening host: String, port: UInt16, errno code: Int32) {
        switch code {
        case EADDRINUSE: self = .addressInUse(host: host, port: port)
        case 0: self = .cannotListen(host: host, port: port, reason: "libmicrohttpd refused to start")
        default: self = .cannotListen(host: host, port: port, reason: String(cString: strerror(code)))
        }
    }

    /// One line.
    package var description: String {
        switch self {
        case .invalidAddress(let host): "\(FeedError.quoted(host)) is not an IPv4 or IPv6 address"
        case .addressInUse(let host, let port): "\(SocketAddress.display(host: host, port: port)) is in use by another program"
        case .cannotListen(let host, let port, let reason): "cannot listen on \(SocketAddress.display(host: host, port: port)): \(reason)"
        case .database(let error): error.description
        }
    }
}
