/// How `feedsync serve` listens and what it accepts (`Docs/HTTP.md`, "Limits and hostile input").
package struct ServerConfiguration: Sendable {
    /// The address to listen on; loopback unless the operator says otherwise.
    package var host = "127.0.0.1"
    /// The port; 0 picks a free one (tests).
    package var port: UInt16 = 8080
    /// The largest request body, except a sync push's.
    package var maximumBody = 64 << 10
    /// The largest sync push body.
    package var maximumSyncBody = 8 << 20
    /// The most bytes of request headers (libmicrohttpd answers 431 beyond): each connection's memory pool.
    package var maximumHeaders = 16 << 10
    /// The most event streams open at once (`serve --max-streams`); more get 503 with `Retry-After`.
    package var maximumStreams = 10_000
    /// The most connections besides event streams (API calls, `/health`, idle keep-alive connections); the server
    /// holds `maximumStreams + maximumRequestConnections` connections and refuses more at accept.
    package var maximumRequestConnections = 1_024
    /// The most connections from one client address (`serve --max-connections-per-ip`; 0: no limit, for a server
    /// behind a proxy that limits per client). A request on a connection over it gets 503; 16 more are refused at
    /// accept.
    package var maximumConnectionsPerAddress = 500
    /// Threads that run the routes that wait for the database (`serve --workers`).
    package var workers = 8
    /// Requests that may wait for a worker; more get 503 with `Retry-After` at once.
    package var maximumQueuedRequests = 1_024
    /// I/O threads (libmicrohttpd's pool); 0: one per core.
    package var ioThreads = 0
    /// Events the shared tail of the event streams keeps; a live stream that falls further behind ends with
    /// `event: behind`.
    package var tailCapacity = 4_096
    /// Seconds a new connection has to send its request's headers (without progress) before it is closed.
    package var headerTimeout = 10
    /// Seconds without progress after which a connection is closed, once its headers came.
    package var idleTimeout = 30
    /// Whether `GET /metrics` answers other addresses than loopback (`serve --public-metrics`).
    package var publicMetrics = false
    /// Seconds between the comment lines that keep an idle event stream open.
    package var heartbeat = 15
    /// Demo mode: the page offers the sample users' tokens (loopback only).
    package var demo = false
    /// In demo mode, the users `GET /api/demo/tokens` offers, with a token each.
    package var demoUsers: [DemoUser] = []

    /// A user the demo page offers, with a token for it.
    package struct DemoUser: Sendable {
        /// The user's id and display name.
        package var user: String, name: String
        /// A bearer token of that user.
        package var token: String

        /// A demo user from its parts.
        package init(user: String, name: String, token: String) {
            self.user = user
            self.name = name
            self.token = token
        }
    }

    /// The defaults.
    package init() {}
}
