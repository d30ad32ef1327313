import FeedCore
import FeedPostgresBackend
import FeedTestSupport
import Foundation
import Testing

/// A URL that names the server's socket directory (`host=/path`) connects through the Unix-domain socket, as an app
/// on the database's own machine would (Docs/Scaling.md: cheaper round trips than TCP on the same host).
@Suite struct SocketConnectionTests {
    /// The test database's URL rewritten to reach the server through its socket in `FEEDSYNC_TEST_POSTGRES_DIR`
    /// (`.ci/postgres-server.sh` lets the `feedsync` role in there with its password); `nil` when there is no such
    /// directory or this process may not open the socket.
    private static func socketURL(for url: String) -> String? {
        guard let directory = ProcessInfo.processInfo.environment["FEEDSYNC_TEST_POSTGRES_DIR"], !directory.isEmpty,
            let at = url.range(of: "@"), let slash = url[at.upperBound...].firstIndex(of: "/")
        else { return nil }
        let hostPort = url[at.upperBound..<slash]
        guard let colon = hostPort.lastIndex(of: ":") else { return nil }
        let port = String(hostPort[hostPort.index(after: colon)...])
        guard access(directory + "/.s.PGSQL." + port, R_OK | W_OK) == 0 else { return nil }
        let rest = String(url[slash...])
        let separator = rest.contains("?") ? "&" : "?"
        return String(url[..<at.upperBound]) + rest + separator + "host=" + directory + "&port=" + port
    }

    @Test func aSocketDirectoryURLConnectsThroughTheSocket() throws {
        guard let db = try TestDatabase.make("socket_url") else { return }
        guard let url = Self.socketURL(for: db.url) else {
            FileHandle.standardError.write(Data("SocketConnectionTests: no reachable server socket; skipped\n".utf8))
            return
        }
        #expect(!url.contains("127.0.0.1"))
        let backend = try PostgresBackend(url: url)
        defer { backend.close() }
        try write(backend) { tx in
            _ = try tx.insertUser(id: "u1", name: "", at: testTime)
            _ = try tx.insertPost(id: "p1", authorID: "u1", body: "over the socket", at: testTime)
        }
        // A session on a Unix-domain socket has no server address.
        let overSocket = try backend.readOnce { tx in try tx.userStatements.fetch("SELECT inet_server_addr() IS NULL", []) }
        #expect(overSocket.first?.first == .integer(1))
        // The rows are the database's: the TCP backend sees them.
        #expect(try db.backend.readOnce { tx in try tx.allUsers().map(\.id) } == ["u1"])
        // The location shown never carries the password, which is in the URL's user info.
        let password = try #require(db.url.split(separator: "@").first?.split(separator: ":").last.map(String.init))
        #expect(!backend.location.contains(password) && backend.location.contains("host="))
    }
}
