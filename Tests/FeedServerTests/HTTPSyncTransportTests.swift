import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The replica's wait on the event stream (``HTTPSyncTransport/waitForChanges(after:timeout:)``) against a stand-in
/// server that answers one request and records it: the token goes in the `Authorization` header and never in the URL,
/// the first event ends the wait, and a refused token is ``SyncError/unauthorized``.
// Blocks: the stand-in server's thread accepts and reads with socket timeouts.
@Suite(.ownThreads) struct HTTPSyncTransportTests {
    @Test func waitingForChangesSendsTheTokenAndEndsAtTheFirstEvent() async throws {
        // The stream stays open after its first event: only the event can end the wait early.
        let server = try OneRequestServer(answer: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nid: 7\ndata: {\"seq\":7}\n\n")
        let transport = HTTPSyncTransport(baseURL: try #require(URL(string: "http://127.0.0.1:\(server.port)/")), token: "fst_1_secret")
        let started = ContinuousClock.now
        try await transport.waitForChanges(after: 6, timeout: .seconds(120))
        #expect(ContinuousClock.now - started < .seconds(60))
        let head = try #require(server.request(timeout: 30)).lowercased()
        #expect(head.hasPrefix("get /api/events?after=6 http/1.1\r\n"), "\(head)")
        #expect(head.contains("\r\nauthorization: bearer fst_1_secret\r\n"), "\(head)")
        #expect(head.split(separator: "\r\n").first?.contains("secret") == false)
    }

    @Test func aRefusedTokenEndsTheWaitAsUnauthorized() async throws {
        let body = #"{"error":"the token is not valid","code":"unauthorized"}"#
        let server = try OneRequestServer(
            answer: "HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\nWWW-Authenticate: Bearer\r\n"
                + "Content-Length: \(body.utf8.count)\r\n\r\n\(body)")
        let transport = HTTPSyncTransport(baseURL: try #require(URL(string: "http://127.0.0.1:\(server.port)/")), token: "fst_1_gone")
        let started = ContinuousClock.now
        await #expect(throws: SyncError.unauthorized) { try await transport.waitForChanges(after: 0, timeout: .seconds(120)) }
        #expect(ContinuousClock.now - started < .seconds(60))
        #expect(try #require(server.request(timeout: 30)).lowercased().contains("\r\nauthorization: bearer fst_1_gone\r\n"))
    }
}

/// A loopback server for one connection: it reads one request's head, records it, writes `answer`, and holds the
/// connection until the client closes it (or 60 s pass).
private final class OneRequestServer: Sendable {
    let port: UInt16
    private let listener: Int32
    private let head = LockedValue<String?>(nil)
    private let received = DispatchSemaphore(value: 0)

    init(answer: String) throws {
        listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw HTTPTestError.socket("socket: \(errno)") }
        // Linux applies the receive timeout to accept as well: a client that never comes cannot hold the thread.
        var time = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(listener, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr = in_addr(s_addr: UInt32(0x7f00_0001).bigEndian)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listener = listener
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, 4) == 0 && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw HTTPTestError.socket("bind/listen: \(errno)")
        }
        port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in serve(answer) }
        thread.name = "one-request-server"
        thread.start()
    }

    deinit {
        close(listener)
    }

    /// The request's head (request line and headers), once it arrived within `timeout` seconds.
    func request(timeout: Double) -> String? {
        guard received.wait(timeout: .now() + timeout) == .success else { return nil }
        received.signal()
        return head.withLock { $0 }
    }

    private func serve(_ answer: String) {
        let fd = accept(listener, nil, nil)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var time = timeval(tv_sec: 60, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while HTTPTestClient.headerEnd(bytes) == nil {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { return }
            bytes += buffer[0..<count]
        }
        head.withLock { $0 = String(decoding: bytes, as: UTF8.self) }
        received.signal()
        HTTPTestClient.send(fd, Array(answer.utf8))
        while recv(fd, &buffer, buffer.count, 0) > 0 {}
    }
}
