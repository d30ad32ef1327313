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
/// Threading: libmicrohttpd's polling thread accepts connections and starts one thread per connection
/// (`MHD_USE_THREAD_PER_CONNECTION`). That thread parses the request and runs every callback for it — the access
/// handler, which calls FeedService's blocking API; an event stream's reader, which blocks on ``ServerSignals`` until
/// a commit or a heartbeat; the completion callback. The bridge's delivery executor only signals ``ServerSignals``
/// and never waits for a connection thread. ``stop()`` (the caller's thread) waits for the requests in flight, which
/// wait only for the database; then `MHD_stop_daemon` joins the connection threads.
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
        let signals = ServerSignals(lastSeq: lastSeq)
        // One sink for the whole server: the delivery executor only records the seq and wakes the streams.
        let subscription = service.bridge.changes.sink { event in signals.noteCommitted(event.seq) }
        let core = ServerCore(service: service, configuration: configuration, authenticator: authenticator, signals: signals)
        // Retained for libmicrohttpd's callbacks until after MHD_stop_daemon (``stop()``) or the failed start.
        let context = Unmanaged.passRetained(core).toOpaque()
        var failure: Int32 = 0
        let daemon = address.withSockaddr { sockaddr in
            Self.startDaemon(configuration, ipv6: address.isIPv6, sockaddr: sockaddr, context: context, failure: &failure)
        }
        guard let daemon else {
            Unmanaged<ServerCore>.fromOpaque(context).release()
            subscription.cancel()
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
        core.signals.stop()
        running.subscription.cancel()
        if !core.signals.waitForIdle(until: Date(timeIntervalSinceNow: Self.drainTimeout)) {
            core.log(.warning, "requests still running after \(Int(Self.drainTimeout)) s are cut off")
        }
        MHD_stop_daemon(running.daemon)
        if listener >= 0 { close(listener) }
        Unmanaged.passUnretained(core).release()
    }

    // MARK: - Starting libmicrohttpd

    /// `MHD_start_daemon_va` with an `MHD_OPTION_ARRAY` (Swift cannot call the variadic `MHD_start_daemon`).
    /// `sockaddr` and the option array need to live only during the call: libmicrohttpd binds before it returns.
    private static func startDaemon(
        _ configuration: ServerConfiguration, ipv6: Bool, sockaddr: UnsafeMutableRawPointer, context: UnsafeMutableRawPointer,
        failure: inout Int32
    ) -> OpaquePointer? {
        // poll(2), not select(2): a process with more than 1,024 open files (a busy server, a test run) gets socket
        // numbers select cannot watch, and libmicrohttpd would drop those connections unanswered.
        var flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_THREAD_PER_CONNECTION.rawValue | MHD_USE_ITC.rawValue
        flags |= MHD_USE_POLL.rawValue
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
        let completed: MHD_RequestCompletedCallback = { context, _, contextSlot, _ in
            guard let context else { return }
            Unmanaged<ServerCore>.fromOpaque(context).takeUnretainedValue().requestCompleted(contextSlot)
        }
        let handler: MHD_AccessHandlerCallback = { context, connection, url, method, _, upload, uploadSize, contextSlot in
            guard let context, let connection, let url, let method, let uploadSize, let contextSlot else { return .NO }
            return Unmanaged<ServerCore>.fromOpaque(context).takeUnretainedValue().handle(
                connection, path: String(cString: url), method: String(cString: method), upload: upload,
                uploadSize: uploadSize, contextSlot: contextSlot)
        }
        // Two-pointer options carry the function in `value` and its closure in `ptr_value`.
        var options: [MHD_OptionItem] = [
            MHD_OptionItem(option: MHD_OPTION.EXTERNAL_LOGGER, value: unsafeBitCast(logger, to: Int.self), ptr_value: context),
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_LIMIT, value: configuration.maximumConnections, ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_TIMEOUT, value: configuration.idleTimeout, ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.CONNECTION_MEMORY_LIMIT, value: configuration.maximumHeaders, ptr_value: nil),
            MHD_OptionItem(option: MHD_OPTION.NOTIFY_COMPLETED, value: unsafeBitCast(completed, to: Int.self), ptr_value: context),
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
