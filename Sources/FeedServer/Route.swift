/// The routes of `Docs/HTTP.md`, matched from a request's method and decoded path.
package enum Route: Sendable, Hashable {
    /// `GET /`: the live page.
    case livePage
    /// `GET /health`.
    case health
    /// `GET /api/feed`.
    case feed
    /// `POST /api/posts`.
    case createPost
    /// `GET /api/posts/{id}`.
    case post(id: String)
    /// `DELETE /api/posts/{id}`: its author deletes a post.
    case deletePost(id: String)
    /// `PUT /api/posts/{id}/like` (`liked` true) or `DELETE` (false).
    case like(postID: String, liked: Bool)
    /// `DELETE /api/me`: the token's user erases themselves.
    case deleteMe
    /// `GET /api/events`.
    case events
    /// `POST /api/sync/push`.
    case syncPush
    /// `POST /api/sync/pull`.
    case syncPull
    /// `GET /api/demo/tokens`: the sample users' tokens, when the server runs with `--demo` (404 otherwise).
    case demoTokens
    /// `GET /metrics`: Prometheus metrics (loopback only unless `serve --public-metrics`).
    case metrics

    /// What a request asks for: a route, a known path with another method, or nothing.
    package enum Match: Sendable, Hashable {
        /// The route to run.
        case route(Route)
        /// The path is known but not with this method; `allow` is the `Allow` header's value.
        case methodNotAllowed(allow: String)
        /// No such path.
        case notFound
    }

    /// Who a route serves.
    package enum Access: Sendable, Hashable {
        /// Anyone; an `Authorization` header is not looked at.
        case anyone
        /// The token's user when a token is sent, anonymous otherwise; a wrong token is refused.
        case viewer
        /// A token's user only.
        case user
    }

    /// Who the route serves.
    package var access: Access {
        switch self {
        case .livePage, .health, .demoTokens, .metrics: .anyone
        case .feed, .post: .viewer
        case .createPost, .deletePost, .like, .deleteMe, .syncPush, .syncPull, .events: .user
        }
    }

    /// The route's name in metrics: one of a fixed set, never an id from the path.
    package var metricName: String {
        switch self {
        case .livePage: "page"
        case .health: "health"
        case .feed: "feed"
        case .createPost: "createPost"
        case .post: "post"
        case .deletePost: "deletePost"
        case .deleteMe: "deleteMe"
        case .like(_, let liked): liked ? "like" : "unlike"
        case .events: "events"
        case .syncPush: "syncPush"
        case .syncPull: "syncPull"
        case .demoTokens: "demoTokens"
        case .metrics: "metrics"
        }
    }

    /// The largest body the route accepts (413 beyond).
    package func maximumBody(in configuration: ServerConfiguration) -> Int {
        self == .syncPush ? configuration.maximumSyncBody : configuration.maximumBody
    }

    /// Matches `method` and `path` (percent-decoded, without the query) against the routes.
    package static func match(method: String, path: String) -> Match {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        // A path starts with "/", so `parts[0]` is empty; an empty segment anywhere else is no route.
        guard parts.count >= 2, parts[0].isEmpty, path == "/" || !parts.dropFirst().contains("") else { return .notFound }
        let methods: [String: Route]
        switch Array(parts.dropFirst()) {
        case [""]: methods = ["GET": .livePage]
        case ["health"]: methods = ["GET": .health]
        case ["metrics"]: methods = ["GET": .metrics]
        case ["api", "feed"]: methods = ["GET": .feed]
        case ["api", "posts"]: methods = ["POST": .createPost]
        case ["api", "events"]: methods = ["GET": .events]
        case ["api", "me"]: methods = ["DELETE": .deleteMe]
        case ["api", "sync", "push"]: methods = ["POST": .syncPush]
        case ["api", "sync", "pull"]: methods = ["POST": .syncPull]
        case ["api", "demo", "tokens"]: methods = ["GET": .demoTokens]
        case let segments where segments.count == 3 && segments[0] == "api" && segments[1] == "posts":
            methods = ["GET": .post(id: segments[2]), "DELETE": .deletePost(id: segments[2])]
        case let segments where segments.count == 4 && segments[0] == "api" && segments[1] == "posts" && segments[3] == "like":
            methods = ["PUT": .like(postID: segments[2], liked: true), "DELETE": .like(postID: segments[2], liked: false)]
        default: return .notFound
        }
        if let route = methods[method] { return .route(route) }
        return .methodNotAllowed(allow: methods.keys.sorted().joined(separator: ", "))
    }
}
