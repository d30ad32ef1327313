import FeedCore
import FeedPostgresBackend
import FeedTestSupport
import FeedTestThreads
import Foundation
import Glibc
import Testing

/// The fault-injection proxy against an echo server on loopback (no PostgreSQL needed), and once in front of the
/// PostgreSQL test server.
// Blocks: waits for relay threads, a blocked reader and closing connections (bounded polls).
@Suite(.ownThreads) struct FaultProxyTests {
    private let ping = Array("ping".utf8)

    @Test func bytesRoundTripBothWaysAndTheEndOfStreamPassesThrough() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let sut = try FaultProxy(upstreamPort: echo.port)
        defer { sut.close() }
        let client = try Client(port: sut.port)

        #expect(exchange(client.fd, ping) == ping)
        let payload = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 12) }
        let echoed = exchange(client.fd, payload)
        #expect(echoed.count == payload.count)
        #expect(echoed == payload, "the 1 MiB payload came back changed")
        #expect(sut.acceptedConnections == 1 && sut.openPairs == 1)

        // The client's end of stream reaches the server, which closes; its end of stream comes back.
        shutdown(client.fd, Int32(SHUT_WR))
        #expect(
            inputEvents(on: [client.fd], within: .seconds(30)) != [0],
            "no end of stream: \(sut.openPairs) pair(s) open in the proxy, \(echo.openConnections) in the echo server")
        var byte: UInt8 = 0
        #expect(recv(client.fd, &byte, 1, 0) == 0)
        #expect(eventually { sut.openPairs == 0 })
    }

    @Test func resetAllAbortsOpenConnectionsAndNewOnesWork() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let sut = try FaultProxy(upstreamPort: echo.port)
        defer { sut.close() }
        let client = try Client(port: sut.port)
        #expect(exchange(client.fd, ping) == ping)

        // A reader blocked in recv(2); the receive timeout only bounds the test should the reset never come.
        var timeout = timeval(tv_sec: Int(stallLimit.components.seconds), tv_usec: 0)
        setsockopt(client.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let outcome = Shared<(count: Int, error: Int32)?>(nil)
        let fd = client.fd
        let reader = spawn("blocked reader") {
            var byte: UInt8 = 0
            let count = recv(fd, &byte, 1, 0)
            let error = errno
            outcome.update { $0 = (count, error) }
        }
        let start = ContinuousClock.now
        sut.resetAll()
        #expect(sut.openPairs == 0)
        join([reader])
        #expect(ContinuousClock.now - start < .seconds(5))
        let result = try #require(outcome.current)
        #expect(result.count == -1 && result.error == ECONNRESET, "recv returned \(result.count), errno \(result.error)")
        // The server's side was reset too.
        #expect(eventually { echo.openConnections == 0 })

        let next = try Client(port: sut.port)
        #expect(exchange(next.fd, ping) == ping)
        #expect(sut.acceptedConnections == 2 && sut.openPairs == 1)
    }

    @Test func blackholedConnectionsStaySilentAndHealingOnlyHelpsNewOnes() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let sut = try FaultProxy(upstreamPort: echo.port)
        defer { sut.close() }
        let old = try Client(port: sut.port)
        #expect(exchange(old.fd, ping) == ping)

        sut.blackhole()
        #expect(sut.mode == .blackholed)
        let during = try Client(port: sut.port)
        #expect(sendAll(old.fd, ping) && sendAll(during.fd, ping))
        // No reply, no end of stream, no error: both look healthy.
        #expect(inputEvents(on: [old.fd, during.fd], within: .milliseconds(500)) == [0, 0])
        #expect(eventually { sut.acceptedConnections == 2 })
        #expect(echo.accepted == 1, "a connection accepted while blackholed reached the server")

        sut.heal()
        #expect(sut.mode == .forwarding)
        let after = try Client(port: sut.port)
        #expect(exchange(after.fd, ping) == ping)
        #expect(sendAll(old.fd, ping) && sendAll(during.fd, ping))
        #expect(inputEvents(on: [old.fd, during.fd], within: .milliseconds(500)) == [0, 0])
        #expect(sut.openPairs == 3)

        // When a lost connection's client closes it, the proxy closes the server's side too.
        old.close()
        during.close()
        #expect(eventually { sut.openPairs == 1 })
        #expect(eventually { echo.openConnections == 1 })
        #expect(exchange(after.fd, ping) == ping)
    }

    @Test func closeReturnsPromptlyWithConnectionsOpen() throws {
        let echo = try EchoServer()
        defer { echo.stop() }
        let sut = try FaultProxy(upstreamPort: echo.port)
        let clients = try (0..<3).map { _ in try Client(port: sut.port) }
        for client in clients { #expect(exchange(client.fd, ping) == ping) }
        sut.blackhole()
        let lost = try Client(port: sut.port)
        #expect(eventually { sut.acceptedConnections == 4 })

        let start = ContinuousClock.now
        sut.close()
        sut.close()
        // A close that waited for the open connections would never return (the blackholed one never ends); what it
        // does wait for is its two threads to wake and end, which took 2.5 s once in the full parallel run on 2 cores.
        #expect(ContinuousClock.now - start < .seconds(10))
        #expect(sut.openPairs == 0)
        // Every client sees an orderly end of stream.
        for client in clients + [lost] {
            #expect(inputEvents(on: [client.fd], within: .seconds(30)) != [0])
            var byte: UInt8 = 0
            #expect(recv(client.fd, &byte, 1, 0) == 0)
        }
        // Commands after close do nothing and do not wait.
        sut.resetAll()
        sut.blackhole()
    }

    @Test func aRefusedUpstreamClosesTheClient() throws {
        // A port that is bound but not listening refuses connections.
        let placeholder = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        defer { close(placeholder) }
        let port = try bindLoopback(placeholder)
        let sut = try FaultProxy(upstreamPort: port)
        defer { sut.close() }
        let client = try Client(port: sut.port)
        #expect(inputEvents(on: [client.fd], within: .seconds(30)) != [0])
        var byte: UInt8 = 0
        #expect(recv(client.fd, &byte, 1, 0) == 0)
        #expect(sut.acceptedConnections == 1 && sut.openPairs == 0)
    }

    @Test func urlsAndUpstreamsStayOnLoopback() throws {
        let sut = try FaultProxy(upstreamURL: "postgresql://feedsync@localhost/feed")
        defer { sut.close() }
        #expect(
            sut.url(replacingPortOf: "postgresql://user:pw@127.0.0.1:5432/db?x=y")
                == "postgresql://user:pw@127.0.0.1:\(sut.port)/db?x=y")
        #expect(sut.url(replacingPortOf: "postgresql://localhost/db") == "postgresql://127.0.0.1:\(sut.port)/db")
        #expect(sut.url(replacingPortOf: "postgres://u@[::1]:5433") == "postgres://u@127.0.0.1:\(sut.port)")
        #expect(throws: FaultProxy.SetupError.self) { try FaultProxy(upstreamHost: "10.0.0.1", upstreamPort: 5432) }
        #expect(throws: FaultProxy.SetupError.self) { try FaultProxy(upstreamURL: "postgresql://u@db.example.com:5432/x") }
        #expect(throws: FaultProxy.SetupError.self) { try FaultProxy(upstreamURL: "postgresql:///feed?host=/tmp") }
    }

    @Test func aPostgresBackendQueriesThroughTheProxyAndReconnectsAfterAReset() throws {
        guard let database = try PostgresTestDatabase.make("fault_proxy") else { return }
        defer { database.drop() }
        let sut = try FaultProxy(upstreamURL: database.url)
        defer { sut.close() }
        let backend = try PostgresBackend(url: sut.url(replacingPortOf: database.url))
        defer { backend.close() }
        #expect(try backend.readOnce { tx in try tx.lastSeq() } == 0)
        let accepted = sut.acceptedConnections
        #expect(accepted >= 1)

        // The pool's idle connections are reset; the next read opens a new one, through the proxy again.
        sut.resetAll()
        #expect(sut.openPairs == 0)
        #expect(try backend.readOnce { tx in try tx.lastSeq() } == 0)
        #expect(sut.acceptedConnections > accepted)
    }
}

// MARK: - Sockets

/// A socket call in a test failed.
private struct SocketFailure: Error, CustomStringConvertible {
    let call: String
    let code: Int32 = errno

    var description: String { "\(call) failed: \(String(cString: strerror(code)))" }
}

/// Binds `fd` to a free port on 127.0.0.1 and returns the port.
private func bindLoopback(_ fd: Int32) throws -> Int {
    var address = loopback(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw SocketFailure(call: "bind") }
    return Int(UInt16(bigEndian: address.sin_port))
}

private func loopback(port: Int) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr = in_addr(s_addr: UInt32(0x7f00_0001).bigEndian)
    return address
}

/// A blocking client socket connected to 127.0.0.1, closed when released.
private final class Client {
    let fd: Int32
    private var isOpen = true

    init(port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketFailure(call: "socket") }
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let failure = SocketFailure(call: "connect")
            Glibc.close(fd)
            throw failure
        }
    }

    deinit { close() }

    func close() {
        if isOpen { Glibc.close(fd) }
        isOpen = false
    }
}

/// Sends a few bytes at once; whether they all went.
private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
    send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count
}

/// Sends `bytes` while reading as many back, within ``stallLimit``; what came back (short on a stall or an error).
private func exchange(_ fd: Int32, _ bytes: [UInt8]) -> [UInt8] {
    var received: [UInt8] = []
    received.reserveCapacity(bytes.count)
    var sent = 0
    var buffer = [UInt8](repeating: 0, count: 64 << 10)
    let deadline = ContinuousClock.now + stallLimit
    while received.count < bytes.count, ContinuousClock.now < deadline {
        let wanted = Int16(POLLIN) | (sent < bytes.count ? Int16(POLLOUT) : 0)
        var entry = pollfd(fd: fd, events: wanted, revents: 0)
        guard poll(&entry, 1, milliseconds(deadline - .now)) > 0 else { continue }
        if entry.revents & Int16(POLLOUT) != 0 && sent < bytes.count {
            let count = bytes.withUnsafeBytes {
                send(fd, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_DONTWAIT | MSG_NOSIGNAL))
            }
            if count > 0 { sent += count }
        }
        if entry.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 {
            let count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                received += buffer[..<count]
            } else if count == 0 || (errno != EAGAIN && errno != EINTR) {
                break
            }
        }
    }
    return received
}

/// Waits up to `limit` for input, an end of stream or an error on any of `fds`; each one's `revents` (all 0 when
/// nothing happened).
private func inputEvents(on fds: [Int32], within limit: Duration) -> [Int16] {
    var entries = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
    let deadline = ContinuousClock.now + limit
    while poll(&entries, nfds_t(entries.count), milliseconds(deadline - .now)) < 0 && errno == EINTR {}
    return entries.map(\.revents)
}

private func milliseconds(_ duration: Duration) -> Int32 {
    let (seconds, attoseconds) = duration.components
    return Int32(clamping: max(0, seconds * 1_000 + attoseconds / 1_000_000_000_000_000))
}

// MARK: - Echo server

/// A loopback TCP server that sends every byte back, one thread per connection; it closes a connection when the
/// client ends its stream.
private final class EchoServer: Sendable {
    let port: Int
    private let listener: Int32
    private let state = LockedValue(Connections())

    private struct Connections {
        var accepted = 0
        var open: Set<Int32> = []
        var stopped = false
    }

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw SocketFailure(call: "socket") }
        do {
            port = try bindLoopback(fd)
            guard listen(fd, SOMAXCONN) == 0 else { throw SocketFailure(call: "listen") }
        } catch {
            close(fd)
            throw error
        }
        listener = fd
        Thread { [self] in acceptLoop() }.start()
    }

    /// Connections accepted so far.
    var accepted: Int { state.withLock { $0.accepted } }
    /// Connections not yet closed.
    var openConnections: Int { state.withLock { $0.open.count } }

    /// Stops accepting and ends every connection; the threads close their sockets as they leave.
    func stop() {
        state.withLock { state in
            guard !state.stopped else { return }
            state.stopped = true
            // On Linux, shutdown(2) wakes a thread blocked in accept(2) or recv(2) on the socket.
            shutdown(listener, Int32(SHUT_RDWR))
            for fd in state.open { shutdown(fd, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        while true {
            let fd = accept(listener, nil, nil)
            let (kept, stopped) = state.withLock { state -> (Bool, Bool) in
                guard !state.stopped, fd >= 0 else { return (false, state.stopped) }
                state.accepted += 1
                state.open.insert(fd)
                return (true, false)
            }
            if kept {
                Thread { [self] in echo(fd) }.start()
                continue
            }
            if fd >= 0 { close(fd) }
            if stopped { break }
        }
        close(listener)
    }

    private func echo(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        receiving: while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            var sent = 0
            while sent < count {
                let written = buffer.withUnsafeBytes { send(fd, $0.baseAddress! + sent, count - sent, Int32(MSG_NOSIGNAL)) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break receiving }
                sent += written
            }
        }
        state.withLock { state in
            state.open.remove(fd)
            close(fd)
        }
    }
}
