internal import CMicroHTTPD
internal import FeedJSON
internal import FeedSync
internal import FeedDomain
internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#endif

/// What the server's callbacks share: the service, the configuration, the budgets, the worker pool and the fan-out.
///
/// libmicrohttpd holds it as the `cls` pointer of every callback (retained by ``HTTPServer`` from the daemon's start
/// until after `MHD_stop_daemon` returned, so no callback outlives it). Its callbacks run on the I/O threads and never
/// wait for the database: a route that needs it is suspended and handed to ``workers`` (`Docs/HTTP.md`, "Threads and
/// who waits on whom").
final class ServerCore: Sendable {
    let service: FeedService
    let configuration: ServerConfiguration
    let authenticator: HTTPServer.Authenticator
    let metrics: ServerMetrics
    let workers: WorkerPool
    let hub: StreamHub
    let hangUps: HangUpWatch?
    let addresses = AddressBook()
    /// Event streams open or being opened (their slot is taken from the request's headers to the stream's end).
    let streamSlots = Atomic<Int>(0)
    private let requestCount = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    /// `GET /api/feed`'s page size when the request names none.
    static let defaultPageSize = 20
    /// How many bytes of a chunked body past the route's limit are read and dropped before the connection is closed.
    static let discardAllowance = 1 << 20

    init(service: FeedService, configuration: ServerConfiguration, authenticator: @escaping HTTPServer.Authenticator, lastSeq: Int64) {
        self.service = service
        self.configuration = configuration
        self.authenticator = authenticator
        let metrics = ServerMetrics()
        self.metrics = metrics
        workers = WorkerPool(
            threads: max(1, configuration.workers), queueLimit: max(1, configuration.maximumQueuedRequests), metrics: metrics)
        let logger = service.configuration.logger
        hub = StreamHub(
            service: service, lastSeq: lastSeq, capacity: configuration.tailCapacity, heartbeat: Double(configuration.heartbeat),
            metrics: metrics,
            log: { message in
                logger?(FeedLogEvent(kind: FeedLogEvent.Kind(rawValue: "http.server"), level: .warning, message: message, fields: [:]))
            })
        hangUps = HangUpWatch()
    }

    var isStopping: Bool { stopping.load(ordering: .acquiring) }

    /// Requests between their headers and libmicrohttpd's completion.
    var requestsInFlight: Int { requestCount.load(ordering: .acquiring) }

    func beginStopping() { stopping.store(true, ordering: .releasing) }

    /// Hands a line to the service's logger, if it has one. Never called with request headers: they carry tokens.
    func log(_ level: FeedLogEvent.Level, _ message: String, _ fields: [String: String] = [:]) {
        guard let logger = service.configuration.logger else { return }
        logger(FeedLogEvent(kind: FeedLogEvent.Kind(rawValue: "http.server"), level: level, message: message, fields: fields))
    }

    // MARK: - The access handler

    /// libmicrohttpd's access handler for one call, on an I/O thread.
    ///
    /// The first call of a request comes once its headers are read: it creates the request's context in
    /// `*contextSlot` (released by ``requestCompleted(_:)``) and answers at once what needs no body and no database — an
    /// unknown route, a wrong method, a missing token, a full budget, a `Content-Length` over the limit. Later calls
    /// hand over body chunks, which the context collects up to the route's limit (a chunked body over it is dropped,
    /// and its connection closed once ``discardAllowance`` more arrived). The last call (no data) answers a route that
    /// needs no database at once; any other is suspended and runs on a worker, which resumes the connection with its
    /// answer, and libmicrohttpd calls once more to send it.
    func handle(
        _ connection: OpaquePointer, path: String, method: String, upload: UnsafePointer<CChar>?,
        uploadSize: UnsafeMutablePointer<Int>, contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let opaque = contextSlot.pointee else {
            requestCount.wrappingAdd(1, ordering: .acquiringAndReleasing)
            let context = RequestContext()
            contextSlot.pointee = Unmanaged.passRetained(context).toOpaque()
            feedsync_mhd_set_timeout(connection, UInt32(max(0, configuration.idleTimeout)))
            if let early = firstLook(connection, path: path, method: method, context: context) {
                context.answered = true
                return queue(early, on: connection, context: context)
            }
            return .YES
        }
        let context = Unmanaged<RequestContext>.fromOpaque(opaque).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            if let upload, !context.answered { context.append(UnsafeRawBufferPointer(start: upload, count: uploadSize.pointee)) }
            uploadSize.pointee = 0
            // A chunked body over the limit is read on (and dropped) so that its end gets the 413, but not without
            // end: past the allowance the connection is closed. libmicrohttpd takes no answer while a body arrives.
            if context.tooLarge, context.received > context.limit + Self.discardAllowance { return .NO }
            return .YES
        }
        if let outcome = context.takeOutcome() {
            switch outcome {
            case .answer(let answer): return queue(answer, on: connection, context: context)
            case .stream(let stream): return startEventStream(stream, on: connection, context: context)
            }
        }
        guard !context.answered, let route = context.route else { return .YES }
        context.answered = true
        if context.tooLarge { return queue(tooLarge(route), on: connection, context: context) }
        if let inline = inlineAnswer(route, connection: connection) { return queue(inline, on: connection, context: context) }
        return dispatch(route, on: connection, context: context)
    }

    /// Runs `route` on a worker while the connection is suspended; 503 at once when the workers' queue is full.
    private func dispatch(_ route: Route, on connection: OpaquePointer, context: RequestContext) -> MHD_Result {
        // The context's lock is held from the submit to the suspension, and the job takes it before it resumes: the
        // resume can only follow the suspension.
        context.lock.lock()
        let suspended = SuspendedConnection(pointer: connection)
        let submitted = workers.submit { [self] stopping in
            let outcome: RequestContext.Outcome =
                stopping
                ? .answer(.unavailable("the server is stopping; retry on another or later", retryAfter: 1))
                : run(route, context: context)
            context.lock.lock()
            context.outcome = outcome
            context.lock.unlock()
            MHD_resume_connection(suspended.pointer)
        }
        if submitted { MHD_suspend_connection(connection) }
        context.lock.unlock()
        if submitted { return .YES }
        metrics.rejected.add("workers")
        return queue(.unavailable("the server is busy; retry shortly", retryAfter: 1), on: connection, context: context)
    }

    /// Frees a request's context (`MHD_OPTION_NOTIFY_COMPLETED`): the request was answered, or its connection closed.
    func requestCompleted(_ connection: OpaquePointer?, _ contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        guard let contextSlot, let opaque = contextSlot.pointee else { return }
        let context = Unmanaged<RequestContext>.fromOpaque(opaque).takeRetainedValue()
        contextSlot.pointee = nil
        if let stream = context.stream {
            stream.detach()
            hub.unregister(stream.id)
        }
        if context.holdsStreamSlot { streamSlots.wrappingSubtract(1, ordering: .relaxed) }
        requestCount.wrappingSubtract(1, ordering: .acquiringAndReleasing)
    }

    /// Counts a connection by its client's address and watches its socket (`MHD_OPTION_NOTIFY_CONNECTION`); the
    /// watch's id goes into the connection's socket context.
    func connectionStarted(_ connection: OpaquePointer, socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        metrics.openConnections.add(1)
        addresses.add(AddressBook.key(of: connection))
        let id = hangUps?.connectionStarted(socket: feedsync_mhd_connection_fd(connection)) ?? 0
        socketContext?.pointee = UnsafeMutableRawPointer(bitPattern: id)
    }

    func connectionClosed(_ connection: OpaquePointer, socketContext: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        metrics.openConnections.add(-1)
        addresses.remove(AddressBook.key(of: connection))
        if let id = socketContext?.pointee.map({ Int(bitPattern: $0) }) { hangUps?.connectionClosed(id) }
    }

    /// The answer a request gets from its headers alone, or `nil` to go on reading its body.
    private func firstLook(_ connection: OpaquePointer, path: String, method: String, context: RequestContext) -> HTTPAnswer? {
        if isStopping {
            metrics.rejected.add("stopping")
            var answer = HTTPAnswer.unavailable("the server is stopping; retry on another or later", retryAfter: 1)
            answer.headers.append(("Connection", "close"))
            return answer
        }
        let route: Route
        switch Route.match(method: method, path: path) {
        case .notFound: return .error(404, code: "notFound", "no route \(method) \(FeedError.quoted(path))")
        case .methodNotAllowed(let allow):
            var answer = HTTPAnswer.error(405, code: "methodNotAllowed", "\(FeedError.quoted(path)) does not take \(method); use \(allow)")
            answer.headers.append(("Allow", allow))
            return answer
        case .route(let matched): route = matched
        }
        context.routeName = route.metricName
        let perAddress = configuration.maximumConnectionsPerAddress
        if perAddress > 0, addresses.count(AddressBook.key(of: connection)) > perAddress {
            metrics.rejected.add("address")
            var answer = HTTPAnswer.unavailable(
                "this address has \(perAddress) connections open already; close some or retry later", code: "tooManyConnections",
                retryAfter: 5)
            answer.headers.append(("Connection", "close"))
            return answer
        }
        if route == .metrics, !configuration.publicMetrics, !AddressBook.isLoopback(connection) {
            return .error(403, code: "forbidden", "metrics are served to loopback only (serve --public-metrics)")
        }
        let authorization = header(connection, "Authorization")
        if route.access == .user, authorization == nil {
            return .unauthorized("this route needs a token: send Authorization: Bearer TOKEN")
        }
        if route == .events {
            if streamSlots.wrappingAdd(1, ordering: .relaxed).newValue > configuration.maximumStreams {
                streamSlots.wrappingSubtract(1, ordering: .relaxed)
                metrics.rejected.add("streams")
                return .unavailable(
                    "the server holds its maximum of \(configuration.maximumStreams) event streams; retry later", code: "tooManyStreams",
                    retryAfter: 5)
            }
            context.holdsStreamSlot = true
            context.after = header(connection, "Last-Event-ID") ?? query(connection, "after")
        }
        let limit = route.maximumBody(in: configuration)
        if let length = header(connection, "Content-Length").flatMap({ Int($0) }), length > limit { return tooLarge(route) }
        context.route = route
        context.limit = limit
        context.authorization = authorization
        context.pageLimit = query(connection, "limit")
        context.before = query(connection, "before")
        return nil
    }

    private func tooLarge(_ route: Route) -> HTTPAnswer {
        var answer = HTTPAnswer.error(
            413, code: "bodyTooLarge", "the body is over this route's limit of \(route.maximumBody(in: configuration)) bytes")
        answer.headers.append(("Connection", "close"))
        return answer
    }

    // MARK: - Authentication

    enum Identity {
        case anonymous
        case user(String)
        case refused(HTTPAnswer)
    }

    /// The acting user from `Authorization: Bearer TOKEN`, by the route's access (on a worker: it reads the database).
    func authenticate(_ header: String?, access: Route.Access) -> Identity {
        guard access != .anyone else { return .anonymous }
        guard let header else {
            if access == .viewer { return .anonymous }
            return .refused(.unauthorized("this route needs a token: send Authorization: Bearer TOKEN"))
        }
        let parts = header.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer", parts[1].utf8.count <= 1024,
            parts[1].utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return .refused(.unauthorized("the Authorization header is not Bearer TOKEN")) }
        do {
            guard let userID = try authenticator(String(parts[1])) else {
                return .refused(.unauthorized("the token is unknown or revoked"))
            }
            return .user(userID)
        } catch {
            return .refused(.feedError(error))
        }
    }

    // MARK: - libmicrohttpd helpers

    /// A request header's value (the first one of that name), on the I/O thread.
    func header(_ connection: OpaquePointer, _ name: String) -> String? {
        MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
    }

    /// A query argument's value, percent-decoded, on the I/O thread.
    func query(_ connection: OpaquePointer, _ name: String) -> String? {
        MHD_lookup_connection_value(connection, .GET_ARGUMENT_KIND, name).map { String(cString: $0) }
    }

    /// Queues `answer`; libmicrohttpd copies the body and keeps the response until it is sent.
    func queue(_ answer: HTTPAnswer, on connection: OpaquePointer, context: RequestContext) -> MHD_Result {
        record(status: answer.status, context: context)
        let response = answer.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let response else { return .NO }
        defer { MHD_destroy_response(response) }
        for (name, value) in answer.headers { _ = MHD_add_response_header(response, name, value) }
        return MHD_queue_response(connection, answer.status, response)
    }

    func record(status: UInt32, context: RequestContext) {
        metrics.requests.add(context.routeName, String(status))
        metrics.requestDuration.observe(context.routeName, WorkerPool.seconds(.now - context.started))
    }
}

/// One request's state, from its headers to its completion: the route, what the headers said, the body so far, and
/// the outcome a worker computed.
///
/// `@unchecked Sendable`: the I/O thread writes every field before it hands the request to a worker (the pool's lock
/// orders that), the worker writes only `outcome`, under `lock`, and the I/O thread reads it under `lock` after the
/// resume. libmicrohttpd keeps the context as the request's `con_cls` pointer, retained until
/// ``ServerCore/requestCompleted(_:_:)``.
final class RequestContext: @unchecked Sendable {
    /// What a worker hands back.
    enum Outcome {
        case answer(HTTPAnswer)
        case stream(EventStream)
    }

    let lock = NSLock()
    let started = ContinuousClock.now
    var route: Route?
    var routeName = "unknown"
    var authorization: String?
    var pageLimit: String?
    var before: String?
    var after: String?
    var limit = 0
    var body: [UInt8] = []
    var tooLarge = false
    var answered = false
    var holdsStreamSlot = false
    /// The event stream this request became.
    var stream: EventStream?
    var outcome: Outcome?
    /// Body bytes received, kept or dropped.
    var received = 0

    /// Adds a body chunk, or drops the body once it passed the limit.
    func append(_ chunk: UnsafeRawBufferPointer) {
        received += chunk.count
        guard !tooLarge else { return }
        if body.count + chunk.count > limit {
            tooLarge = true
            body = []
        } else {
            body.append(contentsOf: chunk)
        }
    }

    func takeOutcome() -> Outcome? {
        lock.lock()
        defer { lock.unlock() }
        let taken = outcome
        outcome = nil
        return taken
    }
}

/// A connection handed to a worker while it is suspended.
///
/// `@unchecked Sendable`: libmicrohttpd's I/O thread does not touch a suspended connection, and the one job that holds
/// this resumes it once, as its last use.
struct SuspendedConnection: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// Open connections by client address, for the per-address limit.
final class AddressBook: Sendable {
    private let counts = Locked<[[UInt8]: Int]>([:])

    func add(_ key: [UInt8]) { counts.withLock { $0[key, default: 0] += 1 } }

    func remove(_ key: [UInt8]) {
        counts.withLock { counts in
            let left = (counts[key] ?? 1) - 1
            counts[key] = left > 0 ? left : nil
        }
    }

    func count(_ key: [UInt8]) -> Int { counts.withLock { $0[key] ?? 0 } }

    /// The client's address bytes (4 for IPv4, 16 for IPv6); empty when libmicrohttpd cannot tell.
    static func key(of connection: OpaquePointer) -> [UInt8] {
        guard let address = feedsync_mhd_client_address(connection) else { return [] }
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                withUnsafeBytes(of: v4.pointee.sin_addr) { Array($0) }
            }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                withUnsafeBytes(of: v6.pointee.sin6_addr) { Array($0) }
            }
        default: return []
        }
    }

    /// Whether the client connects from a loopback address (127.0.0.0/8, ::1, or ::ffff:127.x.x.x).
    static func isLoopback(_ connection: OpaquePointer) -> Bool {
        let key = key(of: connection)
        if key.count == 4 { return key[0] == 127 }
        if key.count == 16 {
            if key == Array(repeating: 0, count: 15) + [1] { return true }
            return key[0..<10].allSatisfy { $0 == 0 } && key[10] == 0xFF && key[11] == 0xFF && key[12] == 127
        }
        return false
    }
}
