import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// W9's load generator: one HTTP/1.1 keep-alive connection over a blocking loopback socket, kept deliberately small
/// so that the client's CPU stays out of the server's way — a request is written in one `send`, and an answer is read
/// as its status line, its headers and a `Content-Length` body. Used by one thread at a time.
final class KeepAliveConnection: @unchecked Sendable {
    // `@unchecked Sendable`: created on the driver's thread, then used only by the client thread it is handed to.
    private let fd: Int32
    /// Received bytes; `buffer[start..<end]` are not consumed yet.
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var start = 0
    private var end = 0

    /// Connects to 127.0.0.1:`port` with a 30 s receive timeout (a stuck server fails the run instead of hanging it).
    init(port: UInt16) throws {
        fd = try loopbackSocket(port: port, timeout: 30)
    }

    deinit { close(fd) }

    /// Writes one request with no body: `METHOD PATH`, plus `Authorization: Bearer TOKEN` when a token is given.
    func send(_ method: String, _ path: String, token: String? = nil) throws {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: bench\r\n"
        if let token { text += "Authorization: Bearer \(token)\r\n" }
        text += "\r\n"
        try sendAll(fd, Array(text.utf8))
    }

    /// Reads the next answer on the connection: its status and its body (which needs a `Content-Length`).
    func receive() throws -> (status: Int, body: ArraySlice<UInt8>) {
        var scanned = start
        var headerEnd: Int?
        while headerEnd == nil {
            while scanned + 3 < end {
                if buffer[scanned] == 13, buffer[scanned + 1] == 10, buffer[scanned + 2] == 13, buffer[scanned + 3] == 10 {
                    headerEnd = scanned
                    break
                }
                scanned += 1
            }
            if headerEnd == nil {
                let consumed = start
                try fill()
                scanned -= consumed
            }
        }
        let head = headerEnd!
        guard head - start > 12, let status = Int(String(decoding: buffer[(start + 9)..<(start + 12)], as: UTF8.self)) else {
            throw BenchError("malformed status line: \(String(decoding: buffer[start..<head], as: UTF8.self))")
        }
        let headers = String(decoding: buffer[start..<head], as: UTF8.self).lowercased()
        guard let range = headers.range(of: "\r\ncontent-length:") else { throw BenchError("an answer without Content-Length") }
        let digits = headers[range.upperBound...].prefix { $0 != "\r" }.trimmingCharacters(in: .whitespaces)
        guard let length = Int(digits) else { throw BenchError("malformed Content-Length \(digits)") }
        var bodyStart = head + 4
        while end - bodyStart < length {
            let consumed = start
            try fill()
            bodyStart -= consumed
        }
        let body = buffer[bodyStart..<(bodyStart + length)]
        start = bodyStart + length
        return (status, body)
    }

    /// Moves the unconsumed bytes to the front and receives more after them.
    private func fill() throws {
        if start > 0 {
            buffer.withUnsafeMutableBytes { bytes in
                guard let base = bytes.baseAddress else { return }
                memmove(base, base + start, end - start)
            }
            end -= start
            start = 0
        }
        if end == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }
        let count = buffer.withUnsafeMutableBytes { bytes in recv(fd, bytes.baseAddress! + end, bytes.count - end, 0) }
        guard count > 0 else { throw BenchError(count == 0 ? "the server closed the connection" : "recv: errno \(errno)") }
        end += count
    }
}

/// A `GET /api/events?after=SEQ` client on a thread of its own, sending `Authorization: Bearer TOKEN` (the stream is
/// private): decodes the chunked stream, and records each event's seq (its `id:`) and when the last one arrived, until
/// the stream ends.
final class SSEFollower: Sendable {
    private struct State {
        var status: Int?
        var seqs: [Int64] = []
        /// `monotonicNanos()` when each seq arrived, by seq.
        var arrivals: [Int64: UInt64] = [:]
        var namedEvents: [String] = []
        var ended = false
    }

    private let fd: Int32
    private let state = Mutex(State())

    init(port: UInt16, after: Int64, token: String) throws {
        fd = try loopbackSocket(port: port, timeout: 120)
        let request =
            "GET /api/events?after=\(after) HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer \(token)\r\nAccept: text/event-stream\r\n\r\n"
        try sendAll(fd, Array(request.utf8))
        let thread = Thread { [self] in readLoop() }
        thread.name = "w9-follower"
        thread.start()
    }

    deinit { Glibc.close(fd) }

    var status: Int? { state.withLock { $0.status } }
    var seqs: [Int64] { state.withLock { $0.seqs } }
    var namedEvents: [String] { state.withLock { $0.namedEvents } }
    var isEnded: Bool { state.withLock { $0.ended } }
    func arrival(of seq: Int64) -> UInt64? { state.withLock { $0.arrivals[seq] } }

    /// Polls `predicate` every millisecond for at most `timeout` seconds; returns its last value.
    func wait(timeout: Double, until predicate: (SSEFollower) -> Bool) -> Bool {
        let deadline = monotonicNanos() + UInt64(timeout * 1e9)
        while !predicate(self) {
            if monotonicNanos() > deadline { return predicate(self) }
            usleep(1000)
        }
        return true
    }

    /// Closes the connection from the client's side (the reader thread then ends).
    func close() { shutdown(fd, Int32(SHUT_RDWR)) }

    private func readLoop() {
        var received: [UInt8] = []
        var chunks = ChunkDecoder()
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        var inBody = false
        var id: Int64?
        var name: String?
        while !chunks.finished {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            if inBody {
                chunks.feed(buffer[0..<count], into: &text)
            } else {
                received += buffer[0..<count]
                guard let head = headerEnd(received) else { continue }
                inBody = true
                let status = Int(String(decoding: received[9..<min(12, head)], as: UTF8.self))
                state.withLock { $0.status = status }
                chunks.feed(received[(head + 4)...], into: &text)
            }
            // Lines: `id: N` and `event: NAME` until the blank line that ends the event; comments are skipped.
            let now = monotonicNanos()
            var lineStart = 0
            var newSeqs: [Int64] = []
            var newNames: [String] = []
            while let newline = text[lineStart...].firstIndex(of: 10) {
                let line = text[lineStart..<newline]
                lineStart = newline + 1
                if line.isEmpty {
                    if let name { newNames.append(name) } else if let id { newSeqs.append(id) }
                    (id, name) = (nil, nil)
                } else if line.starts(with: Self.idPrefix) {
                    // `SEQ.CHECK`: the seq is what the workload counts.
                    id = Int64(String(decoding: line.dropFirst(4).prefix { $0 != UInt8(ascii: ".") }, as: UTF8.self))
                } else if line.starts(with: Self.eventPrefix) {
                    name = String(decoding: line.dropFirst(7), as: UTF8.self)
                }
            }
            text.removeFirst(lineStart)
            if !newSeqs.isEmpty || !newNames.isEmpty {
                state.withLock { state in
                    state.seqs += newSeqs
                    for seq in newSeqs { state.arrivals[seq] = now }
                    state.namedEvents += newNames
                }
            }
        }
        state.withLock { $0.ended = true }
    }

    private static let idPrefix = Array("id: ".utf8)
    private static let eventPrefix = Array("event: ".utf8)
}

/// Decodes a chunked HTTP body as its bytes arrive.
struct ChunkDecoder {
    private enum Phase {
        case size
        case data(Int)
        case dataEnd(Int)
    }

    private var phase = Phase.size
    private var sizeLine: [UInt8] = []
    /// Whether the last (empty) chunk arrived.
    private(set) var finished = false

    /// Appends the body bytes that `bytes` carry to `output`.
    mutating func feed(_ bytes: ArraySlice<UInt8>, into output: inout [UInt8]) {
        var index = bytes.startIndex
        while index < bytes.endIndex, !finished {
            switch phase {
            case .size:
                if bytes[index] == 10 {
                    let text = String(decoding: sizeLine, as: UTF8.self).split(separator: ";").first ?? ""
                    let size = Int(text.trimmingCharacters(in: .whitespacesAndNewlines), radix: 16) ?? 0
                    sizeLine.removeAll(keepingCapacity: true)
                    if size == 0 { finished = true } else { phase = .data(size) }
                } else {
                    sizeLine.append(bytes[index])
                }
                index += 1
            case .data(let remaining):
                let count = min(remaining, bytes.endIndex - index)
                output += bytes[index..<(index + count)]
                index += count
                phase = remaining == count ? .dataEnd(2) : .data(remaining - count)
            case .dataEnd(let remaining):
                index += 1
                phase = remaining == 1 ? .size : .dataEnd(remaining - 1)
            }
        }
    }
}

/// Index of the `\r\n\r\n` that ends a response's headers.
func headerEnd(_ bytes: [UInt8]) -> Int? {
    guard bytes.count >= 4 else { return nil }
    for index in 0...(bytes.count - 4)
    where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
        return index
    }
    return nil
}

/// A connected TCP socket to 127.0.0.1:`port`, Nagle off, with a receive timeout in seconds.
func loopbackSocket(port: UInt16, timeout: Int) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw BenchError("socket: errno \(errno)") }
    var time = timeval(tv_sec: timeout, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    guard connectToLoopback(fd, port: port) == 0 else {
        close(fd)
        throw BenchError("connect to 127.0.0.1:\(port): errno \(errno)")
    }
    return fd
}

/// Turns Nagle off on `fd` and connects it to 127.0.0.1:`port`; `connect`'s result (a non-blocking socket may answer
/// -1 with `EINPROGRESS`).
func connectToLoopback(_ fd: Int32, port: UInt16) -> Int32 {
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

/// Sends all of `bytes`.
func sendAll(_ fd: Int32, _ bytes: [UInt8]) throws {
    var offset = 0
    while offset < bytes.count {
        let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent > 0 else { throw BenchError("send: errno \(errno)") }
        offset += sent
    }
}

/// The integer after `"key":` in a JSON object's bytes (the server's own compact rendering), if any.
func jsonInteger(_ body: ArraySlice<UInt8>, _ key: String) -> Int64? {
    guard let value = jsonValue(body, key) else { return nil }
    return Int64(String(decoding: value.prefix { $0 == 45 || (48...57).contains($0) }, as: UTF8.self))
}

/// The boolean after `"key":` in a JSON object's bytes, if any.
func jsonBool(_ body: ArraySlice<UInt8>, _ key: String) -> Bool? {
    guard let value = jsonValue(body, key) else { return nil }
    if value.starts(with: "true".utf8) { return true }
    if value.starts(with: "false".utf8) { return false }
    return nil
}

private func jsonValue(_ body: ArraySlice<UInt8>, _ key: String) -> ArraySlice<UInt8>? {
    let pattern = Array("\"\(key)\":".utf8)
    guard body.count >= pattern.count else { return nil }
    var index = body.startIndex
    while index <= body.endIndex - pattern.count {
        if body[index..<(index + pattern.count)].elementsEqual(pattern) { return body[(index + pattern.count)...] }
        index += 1
    }
    return nil
}
