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
    /// The most bytes of request headers (libmicrohttpd answers 431 beyond).
    package var maximumHeaders = 32 << 10
    /// The most connections at once; more are refused at accept.
    package var maximumConnections = 512
    /// Seconds without progress after which a connection is closed.
    package var idleTimeout = 30
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
