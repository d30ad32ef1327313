import FeedServer
import FeedSync
import FeedTestSupport
import Foundation

/// A database on one backend with users alice, bob and carol and posts p1…p3, served on a free loopback port.
///
/// Tokens come from a fixed dictionary (`tok-alice` → alice, and so on), then from the database (tokens issued with
/// `service.issueToken`); `tok-gone` stands for a revoked token, `tok-slow` is alice's after a second (it signals
/// ``slowTokenSeen`` first): a request still in flight, and `tok-held` is alice's once the test signals
/// ``releaseHeldToken`` (it signals ``heldTokenSeen`` first; at most 30 s).
final class ServerFixture: Sendable {
    static let tokens = ["tok-alice": "alice", "tok-bob": "bob", "tok-carol": "carol"]

    let dir: TemporaryDirectory
    let location: String
    let service: FeedService
    let server: HTTPServer
    let slowTokenSeen = DispatchSemaphore(value: 0)
    let heldTokenSeen = DispatchSemaphore(value: 0)
    let releaseHeldToken = DispatchSemaphore(value: 0)
    private let watch: Task<Void, Never>?

    var port: UInt16 { server.port }

    /// `nil` when the backend is not configured (PostgreSQL without `FEEDSYNC_TEST_POSTGRES_URL`).
    init?(
        on backend: TestBackend, heartbeat: Int = 15, watchOtherProcesses: Bool = false,
        configure: (inout ServerConfiguration) -> Void = { _ in }
    )
        throws
    {
        dir = TemporaryDirectory("feedsync-http")
        guard let location = try backend.makeLocation(in: dir) else { return nil }
        self.location = location
        service = try FeedService(location: location)
        for user in ["alice", "bob", "carol"] { try service.createUser(id: user) }
        for (index, author) in ["alice", "bob", "carol"].enumerated() {
            try service.createPost(id: "p\(index + 1)", authorID: author, body: "post \(index + 1) by \(author)")
        }
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.heartbeat = heartbeat
        configure(&configuration)
        let tokens = Self.tokens
        let (slowTokenSeen, service) = (slowTokenSeen, service)
        let (heldTokenSeen, releaseHeldToken) = (heldTokenSeen, releaseHeldToken)
        server = try HTTPServer(service: service, configuration: configuration) { token throws(FeedError) in
            if let user = tokens[token] { return user }
            if token == "tok-held" {
                heldTokenSeen.signal()
                _ = releaseHeldToken.wait(timeout: .now() + 30)
                return "alice"
            }
            guard token == "tok-slow" else { return try service.authenticate(token: token) }
            slowTokenSeen.signal()
            Thread.sleep(forTimeInterval: 1)
            return "alice"
        }
        if watchOtherProcesses {
            let service = service
            watch = Task.detached { try? await service.run() }
        } else {
            watch = nil
        }
    }

    /// Stops the server and closes the database.
    func close() {
        server.stop()
        watch?.cancel()
        service.close()
    }

    deinit {
        close()
    }

    /// A request to this server.
    func request(
        _ method: String, _ path: String, token: String? = nil, headers: [String: String] = [:], body: String? = nil
    ) throws -> HTTPTestResponse {
        try HTTPTestClient.request(method, path, port: port, token: token, headers: headers, body: body)
    }
}
