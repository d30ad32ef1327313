internal import CMicroHTTPD
internal import FeedJSON
internal import FeedSync
internal import Foundation
internal import Synchronization

#if canImport(Glibc)
    internal import Glibc
#endif

extension ServerCore {
    /// The socket send buffer of an event stream, in bytes (the kernel doubles it for its own bookkeeping).
    static let streamSendBuffer = 64 << 10

    /// The answer of a route that needs no database (on the I/O thread), or `nil` for one that runs on a worker.
    func inlineAnswer(_ route: Route, connection: OpaquePointer) -> HTTPAnswer? {
        switch route {
        case .livePage:
            return HTTPAnswer(status: 200, headers: [("Content-Type", "text/html; charset=utf-8")], body: Array(LivePage.html.utf8))
        case .metrics:
            return HTTPAnswer(
                status: 200, headers: [("Content-Type", "text/plain; version=0.0.4; charset=utf-8")], body: Array(metrics.render().utf8))
        case .demoTokens:
            guard configuration.demo else { return .error(404, code: "notFound", "no route GET /api/demo/tokens") }
            return .json(
                200,
                .array(
                    configuration.demoUsers.map { demo in
                        .object([("user", .string(demo.user)), ("name", .string(demo.name)), ("token", .string(demo.token))])
                    }))
        default:
            return nil
        }
    }

    /// Runs a route that needs the database, on a worker: the token first, then the route.
    func run(_ route: Route, context: RequestContext) -> RequestContext.Outcome {
        let erasures = hub.erasureCount
        let userID: String?
        switch authenticate(context.authorization, access: route.access) {
        case .refused(let answer): return .answer(answer)
        case .user(let user): userID = user
        case .anonymous: userID = nil
        }
        if route == .events, let userID { return openEventStream(for: userID, erasuresBefore: erasures, context: context) }
        return .answer(answer(route, userID: userID, context: context))
    }

    /// The stream of `userID` after `Last-Event-ID` or `after`: a seq, or an event's id (`SEQ.CHECK`).
    private func openEventStream(for userID: String, erasuresBefore: Int, context: RequestContext) -> RequestContext.Outcome {
        var after: Int64 = 0
        var check: Int64?
        if let given = context.after {
            let parts = given.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
            let parsedCheck =
                parts.count == 2 && parts[1].count == 8 && parts[1].allSatisfy(\.isHexDigit) ? Int64(parts[1], radix: 16) : nil
            guard let parsed = Int64(parts[0]), parsed >= 0, parts.count == 1 || parsedCheck != nil else {
                return .answer(
                    .error(400, code: "invalidRequest", "invalid seq \(FeedError.quoted(given)): pass a seq, 0 or more, or an event's id"))
            }
            after = parsed
            check = parsedCheck
        }
        // Counts the log's rewrites before it looks at the log: one found from here on ends it.
        let rewrites = hub.rewriteCount
        // A seq beyond the log's head, or an id whose seq now names another event, was in another history of the log
        // (before a failover or a restore): the stream says so at once rather than go on from it.
        let position = Self.position(after: after, check: check, viewerID: userID, service: service, tailHead: hub.tailHead)
        let stream = EventStream(
            id: hub.makeStreamID(), viewerID: userID, erasuresBefore: erasuresBefore, rewritesBefore: rewrites, after: after,
            afterCheck: position.check, hub: hub, workers: workers)
        if let head = position.rewrittenHead { stream.endRewritten(head: head) }
        return .stream(stream)
    }

    /// Where a stream asked for after `seq` (with `check`, from an event's id) stands: on another history of the log —
    /// `seq` is beyond the head, or the event there is not the one the id names as `viewerID` saw it — with the log's
    /// head; or on this one, with the check of the log's event at `seq` when the id named it. Neither when the log
    /// cannot be read now (the stream's reads then fail and the client retries).
    private static func position(
        after seq: Int64, check: Int64?, viewerID: String, service: FeedService, tailHead: Int64
    ) -> (rewrittenHead: Int64?, check: Int64?) {
        guard seq > 0, check != nil || seq > tailHead else { return (nil, nil) }
        if let check, let event = try? service.events(after: seq - 1, limit: 1).first, event.seq == seq {
            guard event.seen(by: viewerID).check != check else { return (nil, event.check) }
            return (try? service.logHead(), nil)
        }
        guard let head = try? service.logHead(), head < seq else { return (nil, nil) }
        return (head, nil)
    }

    /// Answers `GET /api/events` with the stream a worker opened: a callback response whose reader is the stream
    /// (on the I/O thread).
    func startEventStream(_ stream: EventStream, on connection: OpaquePointer, context: RequestContext) -> MHD_Result {
        stream.attach(connection)
        guard hub.register(stream) else {
            // Stopping, or a user was erased while the token was looked up: the client retries, and its token is
            // looked up again.
            let reason = hub.isStopping ? "the server is stopping" : "a user was erased while the stream opened"
            var answer = HTTPAnswer.unavailable("\(reason); retry on another or later", retryAfter: 1)
            answer.headers.append(("Connection", "close"))
            return queue(answer, on: connection, context: context)
        }
        context.stream = stream
        let reader = Unmanaged.passRetained(stream).toOpaque()
        // The response holds the stream until libmicrohttpd frees it, which calls `release` exactly once.
        let response = MHD_create_response_from_callback(
            UInt64.max, 4 << 10,  // MHD_SIZE_UNKNOWN: sent chunked
            { stream, _, buffer, size in
                guard let stream, let buffer else { return EventStream.endWithError }
                return Unmanaged<EventStream>.fromOpaque(stream).takeUnretainedValue().read(into: buffer, capacity: size)
            },
            reader,
            { stream in
                guard let stream else { return }
                Unmanaged<EventStream>.fromOpaque(stream).release()
            })
        guard let response else {
            Unmanaged<EventStream>.fromOpaque(reader).release()
            return .NO
        }
        defer { MHD_destroy_response(response) }
        _ = MHD_add_response_header(response, "Content-Type", "text/event-stream")
        _ = MHD_add_response_header(response, "Cache-Control", "no-cache")
        // nginx: never buffer this response, whatever the location's proxy_buffering says.
        _ = MHD_add_response_header(response, "X-Accel-Buffering", "no")
        if let id = feedsync_mhd_socket_context(connection).map({ Int(bitPattern: $0) }) { hangUps?.attach(stream, to: id) }
        // A fixed send buffer: the kernel would otherwise grow it to megabytes for a client that stops reading, all of
        // it held for that client; with this bound such a stream falls behind the tail (and ends) after ~64 KiB.
        var sendBuffer = Int32(Self.streamSendBuffer)
        _ = setsockopt(
            feedsync_mhd_connection_fd(connection), SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size))
        record(status: 200, context: context)
        return MHD_queue_response(connection, 200, response)
    }

    /// Runs a route that answers with one complete response, on a worker (FeedService's blocking API).
    private func answer(_ route: Route, userID: String?, context: RequestContext) -> HTTPAnswer {
        do throws(FeedError) {
            switch route {
            case .health:
                let service = service
                let lastSeq = try Self.database { try service.backend.readOnce { tx in try tx.lastSeq() } }
                return .json(
                    200,
                    .object([("status", .string("ok")), ("backend", .string(service.backend.traits.name)), ("lastSeq", .int(lastSeq))]))
            case .feed:
                let limitText = context.pageLimit
                guard let limit = limitText.map({ Int($0) }) ?? Self.defaultPageSize,
                    (1...FeedService.maximumPageSize).contains(limit)
                else {
                    return .error(
                        400, code: "invalidLimit",
                        "invalid limit \(FeedError.quoted(limitText ?? "")): use 1 to \(FeedService.maximumPageSize)")
                }
                var cursor: FeedCursor?
                if let text = context.before {
                    guard let parsed = FeedCursor(text) else {
                        return .error(400, code: "invalidRequest", "invalid cursor \(FeedError.quoted(text)): pass a page's nextCursor")
                    }
                    cursor = parsed
                }
                return .json(200, JSONShapes.page(try service.feedPage(viewerID: userID, before: cursor, limit: limit)))
            case .post(let id):
                let detail = try service.post(id: id, viewerID: userID)
                return .json(200, JSONShapes.post(detail.post, liked: detail.liked))
            case .createPost:
                guard let userID else { return .unauthorized("this route needs a token") }
                guard let request = try? JSONDecoder().decode(NewPost.self, from: Data(context.body)) else {
                    return .error(400, code: "invalidRequest", #"the body is not JSON {"id"?: text, "body": text}"#)
                }
                let post = try service.createPost(id: request.id, authorID: userID, body: request.body)
                return .json(201, JSONShapes.post(post, liked: false))
            case .like(let postID, let liked):
                guard let userID else { return .unauthorized("this route needs a token") }
                let result = liked ? try service.like(userID: userID, postID: postID) : try service.unlike(userID: userID, postID: postID)
                return .json(200, JSONShapes.likeResult(result))
            case .deletePost(let postID):
                guard let userID else { return .unauthorized("this route needs a token") }
                return .json(200, JSONShapes.postDeletion(try service.deletePost(postID: postID, by: userID)))
            case .deleteMe:
                guard let userID else { return .unauthorized("this route needs a token") }
                let erasure = try service.deleteUser(userID: userID)
                // This server's streams of the user end at once; every server's fan-out also finds them (StreamHub).
                if let seq = erasure.seq { hub.endStreams(of: userID, after: seq) }
                return .json(200, JSONShapes.userErasure(erasure))
            case .syncPush, .syncPull:
                guard let userID else { return .unauthorized("this route needs a token") }
                return sync(route == .syncPush ? .push : .pull, body: Data(context.body), userID: userID)
            case .livePage, .metrics, .demoTokens, .events:
                return .error(500, code: "internal", "\(route.metricName) is not answered by a worker")
            }
        } catch {
            if error.category != .data, error.category != .forbidden { log(.warning, "\(route) failed: \(error)") }
            return .feedError(error)
        }
    }

    /// Runs a backend call, wrapping what it throws as a ``FeedError``.
    private static func database<T>(_ body: () throws -> T) throws(FeedError) -> T {
        do {
            return try body()
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Runs the replica protocol's route as `userID` with ``SyncEndpoint``, on a worker: nothing here waits for Swift's
    /// cooperative pool, which a busy process may have starved.
    private func sync(_ route: SyncEndpoint.Route, body: Data, userID: String) -> HTTPAnswer {
        let response = SyncEndpoint(service: service).respondOnThisThread(to: route, body: body, userID: userID)
        return HTTPAnswer(status: UInt32(response.status), headers: [("Content-Type", "application/json")], body: Array(response.body))
    }
}

/// `POST /api/posts`'s body.
private struct NewPost: Decodable {
    let id: String?
    let body: String
}
