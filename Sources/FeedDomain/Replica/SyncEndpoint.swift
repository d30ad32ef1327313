public import Foundation

/// The source's side of the replica protocol as one value: mount ``push(_:userID:)`` and ``pull(_:userID:)`` (or
/// ``respond(to:body:userID:)`` for JSON bodies) on two routes of your server, passing the user your server
/// authenticated. The user never comes from the message.
///
/// ```swift
/// let endpoint = SyncEndpoint(service: service)
/// // Hummingbird 2
/// router.post("/api/sync/:route") { request, context in
///     let user = try context.authenticatedUserID()            // your authentication
///     let body = try await request.body.collect(upTo: 4 << 20)
///     let answer = await endpoint.respond(to: .init(rawValue: context.parameters.get("route")!)!, body: Data(buffer: body), userID: user)
///     return Response(status: .init(code: answer.status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(data: answer.body)))
/// }
/// ```
///
/// Pushes apply each mutation at most once per client, whatever is retried or delivered twice; pulls answer from
/// one snapshot of the source (`Docs/Replicas.md`).
public struct SyncEndpoint: Sendable {
    /// The source database.
    public let service: FeedService

    /// An endpoint over a source database.
    public init(service: FeedService) {
        self.service = service
    }

    /// Applies a replica's pending mutations as `userID`.
    ///
    /// - Throws: ``SyncError``: `unsupportedVersion`, `invalidRequest`, `clientOfAnotherUser`, `unavailable` (retry
    ///   later), `feed`.
    public func push(_ request: PushRequest, userID: String) async throws(SyncError) -> PushResponse {
        try await onPool { () throws(SyncError) in try service.applyPush(request, userID: userID) }
    }

    /// Answers a replica's pull as `userID`: changes after its cursor, or a snapshot.
    ///
    /// - Throws: ``SyncError``: `unsupportedVersion`, `invalidRequest`, `clientOfAnotherUser`, `accountNotFound`,
    ///   `unavailable`, `feed`.
    public func pull(_ request: PullRequest, userID: String) async throws(SyncError) -> PullResponse {
        try await onPool { () throws(SyncError) in try service.answerPull(request, userID: userID) }
    }

    /// Returns once the source has changes after `seq` (from any process or machine), or after `timeout`.
    public func waitForChanges(after seq: Int64, timeout: Duration) async {
        let changes = service.changes(after: seq)
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                var iterator = changes.makeAsyncIterator()
                _ = try? await iterator.next()
            }
            group.addTask { try? await Task.sleep(for: timeout) }
            await group.next()
            group.cancelAll()
        }
    }

    /// The two routes.
    public enum Route: String, Sendable, CaseIterable {
        /// `POST …/push`: a ``PushRequest``, answered by a ``PushResponse``.
        case push
        /// `POST …/pull`: a ``PullRequest``, answered by a ``PullResponse``.
        case pull
    }

    /// An HTTP answer: a status and a JSON body.
    public struct Response: Sendable, Hashable {
        /// 200, or the error's status (``SyncEndpoint/status(for:)``).
        public let status: Int
        /// The JSON response, or `{"error": "…", "code": "…"}`.
        public let body: Data
    }

    /// Decodes a JSON request for `route`, runs it as `userID` and encodes the answer — for servers that hand over
    /// bodies as bytes. A body that is not the route's JSON message gets 400.
    public func respond(to route: Route, body: Data, userID: String) async -> Response {
        do {
            switch route {
            case .push:
                let request = try Self.decode(PushRequest.self, from: body)
                return try Response(status: 200, body: Self.encoder.encode(await push(request, userID: userID)))
            case .pull:
                let request = try Self.decode(PullRequest.self, from: body)
                return try Response(status: 200, body: Self.encoder.encode(await pull(request, userID: userID)))
            }
        } catch let error as SyncError {
            return Self.errorResponse(error)
        } catch {
            return Self.errorResponse(.feed(FeedError.wrap(error)))
        }
    }

    /// ``respond(to:body:userID:)`` on the calling thread, for a server that runs each request on a thread of its own
    /// (`feedsync serve`): it never waits for Swift's cooperative pool.
    package func respondOnThisThread(to route: Route, body: Data, userID: String) -> Response {
        do throws(SyncError) {
            switch route {
            case .push:
                let answer = try service.applyPush(try Self.decode(PushRequest.self, from: body), userID: userID)
                return Response(status: 200, body: (try? Self.encoder.encode(answer)) ?? Data())
            case .pull:
                let answer = try service.answerPull(try Self.decode(PullRequest.self, from: body), userID: userID)
                return Response(status: 200, body: (try? Self.encoder.encode(answer)) ?? Data())
            }
        } catch {
            return Self.errorResponse(error)
        }
    }

    /// The HTTP status for an error: 400 for a bad message, 401 unauthorized, 403 another user's client or an
    /// account the source does not have (erased, or never created), 503 unavailable (retry), 500 otherwise.
    public static func status(for error: SyncError) -> Int {
        switch error {
        case .unsupportedVersion, .invalidRequest: 400
        case .unauthorized: 401
        case .clientOfAnotherUser, .accountNotFound: 403
        case .unavailable: 503
        case .notAReplica, .feed: 500
        }
    }

    /// The error's JSON body: `{"error": description, "code": name}`.
    public static func errorResponse(_ error: SyncError) -> Response {
        let code =
            switch error {
            case .unsupportedVersion: "unsupportedVersion"
            case .invalidRequest: "invalidRequest"
            case .unauthorized: "unauthorized"
            case .clientOfAnotherUser: "clientOfAnotherUser"
            case .accountNotFound: "accountNotFound"
            case .unavailable: "unavailable"
            case .notAReplica, .feed: "internal"
            }
        let body = (try? encoder.encode(["error": error.description, "code": code])) ?? Data()
        return Response(status: status(for: error), body: body)
    }

    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()

    static func decode<T: Decodable>(_ type: T.Type, from body: Data) throws(SyncError) -> T {
        do {
            return try JSONDecoder().decode(type, from: body)
        } catch {
            throw .invalidRequest("the body is not a \(type) in JSON")
        }
    }

    private func onPool<T: Sendable>(_ body: @escaping @Sendable () throws(SyncError) -> T) async throws(SyncError) -> T {
        let result: Result<T, SyncError>
        do {
            result = try await service.blockingPool.run { () -> Result<T, SyncError> in Result { () throws(SyncError) in try body() } }
        } catch {
            throw SyncError.wrap(error)
        }
        return try result.get()
    }
}
