import FeedServer
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Slow clients, idle connections and the connection limit, on an in-process server with short limits: a stalled
/// request is closed after the idle timeout, a trickling one is not, and a connection over the limit waits unserved
/// in the listen queue until one closes, after which every slot can be filled again.
// Blocks: waits on sockets for an in-process server's idle timeout and connection limit.
@Suite(.ownThreads) struct SlowClientTests {
    @Test func aStalledRequestIsClosedAfterTheIdleTimeoutWhileOthersAreServed() throws {
        guard let sut = try ServerFixture(on: .sqlite, configure: { $0.idleTimeout = 2 }) else { return }
        defer { sut.close() }
        let stalls = [
            "GET /health HTTP/1.1\r\nHost: x\r\n",  // headers never end
            "GET /api/fe",  // the request line never ends
            "POST /api/posts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-alice\r\nContent-Length: 100\r\n\r\n{\"bo",  // short body
        ]
        let connections = try stalls.map { stall in
            let fd = try HTTPTestClient.connect(port: sut.port, timeout: 15)
            HTTPTestClient.send(fd, Array(stall.utf8))
            return fd
        }
        defer { for fd in connections { close(fd) } }
        let started = Date()
        // Meanwhile the server answers everyone else.
        #expect(try sut.request("GET", "/health").status == 200)
        for fd in connections {
            var byte: UInt8 = 0
            let count = recv(fd, &byte, 1, 0)
            let waited = Date().timeIntervalSince(started)
            #expect(count <= 0 && errno != EAGAIN, "the stalled connection is still open after \(waited) s")
            #expect(waited > 1 && waited < 10, "closed after \(waited) s, with an idle timeout of 2 s")
        }
        #expect(try sut.request("GET", "/health").status == 200)
    }

    @Test func aTricklingRequestIsNotCutOff() throws {
        guard let sut = try ServerFixture(on: .sqlite, configure: { $0.idleTimeout = 2 }) else { return }
        defer { sut.close() }
        let fd = try HTTPTestClient.connect(port: sut.port, timeout: 15)
        defer { close(fd) }
        let request = Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
        // Four pieces a second apart: 3 s in all, longer than the idle timeout, never 2 s without progress.
        let size = request.count / 4 + 1
        let pieces = stride(from: 0, to: request.count, by: size).map { Array(request[$0..<min($0 + size, request.count)]) }
        #expect(pieces.count == 4)
        for (index, piece) in pieces.enumerated() {
            if index > 0 { #expect(!readable(fd, within: 1), "the server answered or closed a request still arriving") }
            #expect(HTTPTestClient.send(fd, piece))
        }
        let answer = try HTTPTestClient.parse(readToEnd(fd))
        #expect(answer.status == 200)
    }

    @Test func anEndlessChunkedBodyIsCutOffOnceOverTheLimit() throws {
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        let fd = try HTTPTestClient.connect(port: sut.port, timeout: 15)
        defer { close(fd) }
        let head = "POST /api/posts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-alice\r\nTransfer-Encoding: chunked\r\n\r\n"
        HTTPTestClient.send(fd, Array(head.utf8))
        let chunk = Array("2000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 0x2000) + Array("\r\n".utf8)
        // The body never ends: the server drops what passes the 64 KiB limit, then closes (after 1 MiB more), and
        // does not follow it forever.
        let deadline = Date(timeIntervalSinceNow: 20)
        var sent = 0
        while Date() < deadline, !readable(fd, within: 0), HTTPTestClient.send(fd, chunk) { sent += chunk.count }
        #expect(Date() < deadline, "the server still reads an endless body after \(sent) bytes")
        // What was sent includes what both sockets' buffers hold (several MiB on loopback).
        #expect(sent < 16 << 20, "the server read \(sent) bytes of a body over a 64 KiB limit")
        let answer = try? HTTPTestClient.parse(readToEnd(fd))
        #expect(answer == nil || answer?.status == 413)
        print("endless chunked body: cut off after \(sent) bytes sent, answer \(answer.map { "\($0.status)" } ?? "none")")
        #expect(try sut.request("GET", "/health").status == 200)
    }

    @Test func connectionsOverTheLimitAreRefusedAndEverySlotComesBack() throws {
        let limit = 16
        guard
            let sut = try ServerFixture(
                on: .sqlite,
                configure: {
                    $0.maximumRequestConnections = limit
                    $0.maximumStreams = 0
                    $0.ioThreads = 1
                })
        else { return }
        defer { sut.close() }
        let deadline = Date(timeIntervalSinceNow: 60)
        // Fill every slot with a kept-alive connection that has been answered once (so the server holds it).
        var held = try (0..<limit).map { _ in try keptAlive(port: sut.port) }
        defer { for fd in held { close(fd) } }
        // One more connection waits in the listen queue, unserved, while every slot is taken …
        let extra = try HTTPTestClient.connect(port: sut.port, timeout: 15)
        defer { close(extra) }
        HTTPTestClient.send(extra, Array("GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(!readable(extra, within: 2), "a connection over the limit was served or closed while every slot was taken")
        // … and closing some frees their slots: the waiting connection is served, and so are new ones.
        for fd in held.prefix(4) { close(fd) }
        held.removeFirst(4)
        #expect(readable(extra, within: 10), "the waiting connection was not served after 4 slots came free")
        #expect(String(decoding: readToEnd(extra), as: UTF8.self).hasPrefix("HTTP/1.1 200"), "the waiting connection was not answered 200")
        var answered = false
        while !answered, Date() < deadline {
            answered = (try? HTTPTestClient.request("GET", "/health", port: sut.port))?.status == 200
        }
        #expect(answered, "no slot came free after 4 connections closed")
        // Every slot comes back: all of them can be filled again once the rest close.
        for fd in held { close(fd) }
        held = []
        var refilled: [Int32] = []
        defer { for fd in refilled { close(fd) } }
        while refilled.count < limit, Date() < deadline {
            if let fd = try? keptAlive(port: sut.port) { refilled.append(fd) }
        }
        #expect(refilled.count == limit, "only \(refilled.count) of \(limit) slots came back")
    }

    // MARK: - Helpers

    /// A connection that got one `/health` answer and stays open (HTTP/1.1 keep-alive).
    private func keptAlive(port: UInt16) throws -> Int32 {
        let fd = try HTTPTestClient.connect(port: port, timeout: 5)
        HTTPTestClient.send(fd, Array("GET /health HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            if let end = HTTPTestClient.headerEnd(received) {
                let head = String(decoding: received[..<end], as: UTF8.self).lowercased()
                let length = head.firstMatch(of: #/content-length: *(\d+)/#).flatMap { Int($0.1) } ?? 0
                if received.count >= end + 4 + length, head.hasPrefix("http/1.1 200") { return fd }
            }
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        close(fd)
        throw HTTPTestError.socket("the kept-alive connection was not answered")
    }

    /// Whether `fd` has data or an end to read within `seconds`.
    private func readable(_ fd: Int32, within seconds: Double) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, Int32(seconds * 1000)) > 0
    }

    private func readToEnd(_ fd: Int32) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { return received }
            received += buffer[0..<count]
        }
    }
}
