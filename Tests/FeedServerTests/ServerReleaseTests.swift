import FeedServer
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Releasing a server without ``HTTPServer/stop()`` never waits: its `deinit` hands the stop to a thread of its own,
/// which lets the request in flight finish and then closes the port.
// Blocks: a request held in its handler and the releasing thread, each waited for with a bound.
@Suite(.ownThreads) struct ServerReleaseTests {
    @Test func releasingAServerWithARequestInFlightReturnsAtOnceAndTheServerStopsOnItsOwn() throws {
        let dir = TemporaryDirectory("feedsync-release")
        let service = try FeedService(location: dir.path + "/feed.sqlite")
        defer { service.close() }
        try service.createUser(id: "alice")
        let entered = DispatchSemaphore(value: 0)
        let letGo = DispatchSemaphore(value: 0)
        var configuration = ServerConfiguration()
        configuration.port = 0
        // The authenticator holds `tok-held` until the test lets it go: a request in flight that only the test ends.
        let server = LockedValue<HTTPServer?>(
            try HTTPServer(service: service, configuration: configuration) { token throws(FeedError) in
                guard token == "tok-held" else { return nil }
                entered.signal()
                letGo.wait()
                return "alice"
            })
        let port = try #require(server.withLock { $0?.port })
        let answered = DispatchSemaphore(value: 0)
        Thread {
            _ = try? HTTPTestClient.request("GET", "/api/feed", port: port, token: "tok-held")
            answered.signal()
        }.start()
        try #require(entered.wait(timeout: .now() + 30) == .success, "the held request never reached its handler")

        // Stopping would wait for the held request (up to the drain timeout, then for its thread): the release must
        // not.
        let released = DispatchSemaphore(value: 0)
        Thread {
            server.withLock { $0 = nil }
            released.signal()
        }.start()
        let releasedInTime = released.wait(timeout: .now() + 5) == .success
        letGo.signal()
        #expect(releasedInTime, "releasing the server waited for the request in flight")
        #expect(answered.wait(timeout: .now() + 30) == .success, "the held request never ended")

        // The stop runs on: the port closes.
        #expect(eventually(seconds: 30) { !Self.accepts(port: port) }, "the released server still accepts connections")
    }

    /// Whether a TCP connection to 127.0.0.1:`port` is accepted.
    private static func accepts(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
    }
}
