internal import CMicroHTTPD
internal import FeedJSON
internal import FeedSync
internal import Foundation

/// What the server's callbacks share: the service, the configuration, the authenticator and the signals.
///
/// libmicrohttpd holds it as the `cls` pointer of every callback (retained by ``HTTPServer`` from the daemon's
/// start until after `MHD_stop_daemon` returned, so no callback outlives it). Everything here is immutable or
/// Sendable, so the connection threads use it at once.
final class ServerCore: Sendable {
    let service: FeedService
    let configuration: ServerConfiguration
    let authenticator: HTTPServer.Authenticator
    let signals: ServerSignals
    /// `GET /api/feed`'s page size when the request names none.
    static let defaultPageSize = 20
    /// How many bytes of a chunked body past the route's limit are read and dropped before the connection is closed.
    static let discardAllowance = 1 << 20

    init(
        service: FeedService, configuration: ServerConfiguration, authenticator: @escaping HTTPServer.Authenticator,
        signals: ServerSignals
    ) {
        self.service = service
        self.configuration = configuration
        self.authenticator = authenticator
        self.signals = signals
    }

    /// Hands a line to the service's logger, if it has one. Never called with request headers: they carry tokens.
    func log(_ level: FeedLogEvent.Level, _ message: String, _ fields: [String: String] = [:]) {
        guard let logger = service.configuration.logger else { return }
        logger(FeedLogEvent(kind: FeedLogEvent.Kind(rawValue: "http.server"), level: level, message: message, fields: fields))
    }

    // MARK: - The access handler

    /// libmicrohttpd's access handler for one call, on the connection's thread.
    ///
    /// The first call of a request comes once its headers are read: it creates the request's context in
    /// `*contextSlot` (released by ``requestCompleted(_:)``) and answers at once what needs no body — an unknown
    /// route, a wrong method, a refused token, a `Content-Length` over the limit. Later calls hand over body chunks,
    /// which the context collects up to the route's limit (a chunked body over it is dropped, and its connection closed
    /// once ``discardAllowance`` more arrived); the last call (no data) runs the route.
    func handle(
        _ connection: OpaquePointer, path: String, method: String, upload: UnsafePointer<CChar>?,
        uploadSize: UnsafeMutablePointer<Int>, contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>
    ) -> MHD_Result {
        guard let opaque = contextSlot.pointee else {
            signals.requestStarted()
            let context = RequestContext()
            contextSlot.pointee = Unmanaged.passRetained(context).toOpaque()
            if let early = firstLook(connection, path: path, method: method, context: context) {
                context.answered = true
                return queue(early, on: connection)
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
        guard !context.answered, let route = context.route else { return .YES }
        context.answered = true
        if context.tooLarge { return queue(tooLarge(route), on: connection) }
        if route == .events { return startEventStream(on: connection) }
        return queue(answer(route, connection: connection, context: context), on: connection)
    }

    /// Frees a request's context (`MHD_OPTION_NOTIFY_COMPLETED`): the request was answered, or its connection closed.
    func requestCompleted(_ contextSlot: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        guard let contextSlot, let opaque = contextSlot.pointee else { return }
        Unmanaged<RequestContext>.fromOpaque(opaque).release()
        contextSlot.pointee = nil
        signals.requestEnded()
    }

    /// The answer a request gets from its headers alone, or `nil` to go on reading its body.
    private func firstLook(_ connection: OpaquePointer, path: String, method: String, context: RequestContext) -> HTTPAnswer? {
        if signals.isStopping {
            var answer = HTTPAnswer.unavailable("the server is stopping; retry on another or later")
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
        switch authenticate(header(connection, "Authorization"), access: route.access) {
        case .refused(let answer): return answer
        case .user(let userID): context.userID = userID
        case .anonymous: break
        }
        let limit = route.maximumBody(in: configuration)
        if let length = header(connection, "Content-Length").flatMap({ Int($0) }), length > limit { return tooLarge(route) }
        context.route = route
        context.limit = limit
        return nil
    }

    private func tooLarge(_ route: Route) -> HTTPAnswer {
        var answer = HTTPAnswer.error(
            413, code: "bodyTooLarge", "the body is over this route's limit of \(route.maximumBody(in: configuration)) bytes")
        answer.headers.append(("Connection", "close"))
        return answer
    }

    // MARK: - Authentication

    private enum Identity {
        case anonymous
        case user(String)
        case refused(HTTPAnswer)
    }

    /// The acting user from `Authorization: Bearer TOKEN`, by the route's access.
    private func authenticate(_ header: String?, access: Route.Access) -> Identity {
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

    /// A request header's value (the first one of that name).
    func header(_ connection: OpaquePointer, _ name: String) -> String? {
        MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
    }

    /// A query argument's value, percent-decoded.
    func query(_ connection: OpaquePointer, _ name: String) -> String? {
        MHD_lookup_connection_value(connection, .GET_ARGUMENT_KIND, name).map { String(cString: $0) }
    }

    /// Queues `answer`; libmicrohttpd copies the body and keeps the response until it is sent.
    func queue(_ answer: HTTPAnswer, on connection: OpaquePointer) -> MHD_Result {
        let response = answer.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let response else { return .NO }
        defer { MHD_destroy_response(response) }
        for (name, value) in answer.headers { _ = MHD_add_response_header(response, name, value) }
        return MHD_queue_response(connection, answer.status, response)
    }
}

/// One request's state, from its headers to its completion: the route, the acting user and the body so far.
///
/// Only the request's connection thread touches it (each connection has its own thread); libmicrohttpd keeps it
/// as the request's `con_cls` pointer, retained until ``ServerCore/requestCompleted(_:)``.
final class RequestContext {
    var route: Route?
    var userID: String?
    var limit = 0
    var body: [UInt8] = []
    var tooLarge = false
    var answered = false
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
}
