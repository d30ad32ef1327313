internal import CMicroHTTPD
internal import FeedJSON
internal import FeedSync
internal import Foundation
internal import Synchronization

extension ServerCore {
    /// Runs a route that answers with one complete response, on the connection's thread (FeedService's blocking API).
    func answer(_ route: Route, connection: OpaquePointer, context: RequestContext) -> HTTPAnswer {
        do throws(FeedError) {
            switch route {
            case .livePage:
                return HTTPAnswer(status: 200, headers: [("Content-Type", "text/html; charset=utf-8")], body: Array(LivePage.html.utf8))
            case .health:
                let service = service
                let lastSeq = try Self.database { try service.backend.readOnce { tx in try tx.lastSeq() } }
                return .json(
                    200,
                    .object([("status", .string("ok")), ("backend", .string(service.backend.backendName)), ("lastSeq", .int(lastSeq))]))
            case .feed:
                let limitText = query(connection, "limit")
                guard let limit = limitText.map({ Int($0) }) ?? Self.defaultPageSize,
                    (1...FeedService.maximumPageSize).contains(limit)
                else {
                    return .error(
                        400, code: "invalidLimit",
                        "invalid limit \(FeedError.quoted(limitText ?? "")): use 1 to \(FeedService.maximumPageSize)")
                }
                var cursor: FeedCursor?
                if let text = query(connection, "before") {
                    guard let parsed = FeedCursor(text) else {
                        return .error(400, code: "invalidRequest", "invalid cursor \(FeedError.quoted(text)): pass a page's nextCursor")
                    }
                    cursor = parsed
                }
                return .json(200, JSONShapes.page(try service.feedPage(viewerID: context.userID, before: cursor, limit: limit)))
            case .post(let id):
                let detail = try service.post(id: id, viewerID: context.userID)
                return .json(200, JSONShapes.post(detail.post, liked: detail.liked))
            case .createPost:
                guard let userID = context.userID else { return .unauthorized("this route needs a token") }
                guard let request = try? JSONDecoder().decode(NewPost.self, from: Data(context.body)) else {
                    return .error(400, code: "invalidRequest", #"the body is not JSON {"id"?: text, "body": text}"#)
                }
                let post = try service.createPost(id: request.id, authorID: userID, body: request.body)
                return .json(201, JSONShapes.post(post, liked: false))
            case .like(let postID, let liked):
                guard let userID = context.userID else { return .unauthorized("this route needs a token") }
                let result = liked ? try service.like(userID: userID, postID: postID) : try service.unlike(userID: userID, postID: postID)
                return .json(200, JSONShapes.likeResult(result))
            case .syncPush, .syncPull:
                guard let userID = context.userID else { return .unauthorized("this route needs a token") }
                return sync(route == .syncPush ? .push : .pull, body: Data(context.body), userID: userID)
            case .demoTokens:
                guard configuration.demo else { return .error(404, code: "notFound", "no route GET /api/demo/tokens") }
                return .json(
                    200,
                    .array(
                        configuration.demoUsers.map { demo in
                            .object([("user", .string(demo.user)), ("name", .string(demo.name)), ("token", .string(demo.token))])
                        }))
            case .events:
                return .error(500, code: "internal", "the event stream is not a complete answer")
            }
        } catch {
            if error.category != .data { log(.warning, "\(route) failed: \(error)") }
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

    /// Runs the replica protocol's route as `userID` with ``SyncEndpoint``, on the connection's own thread: nothing
    /// here waits for Swift's cooperative pool, which a busy process may have starved.
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
