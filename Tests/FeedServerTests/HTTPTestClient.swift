import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// One HTTP answer as the client read it off the socket.
struct HTTPTestResponse {
    let status: Int
    /// Header names lowercased.
    let headers: [String: String]
    let body: Data

    var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as a JSON object.
    var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:]
    }
}

enum HTTPTestError: Error {
    case socket(String)
    case malformed(String)
}

/// A deliberately small HTTP/1.1 client over a blocking loopback socket, so tests see the server's real bytes (and
/// can send malformed ones). Every read has a timeout: a stuck server fails the test instead of hanging it.
enum HTTPTestClient {
    /// Connects to `host`:`port` (IPv4 or IPv6 literal) with a receive timeout.
    static func connect(port: UInt16, host: String = "127.0.0.1", timeout: Int = 20) throws -> Int32 {
        let ipv6 = host.contains(":")
        let fd = socket(ipv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HTTPTestError.socket("socket: \(errno)") }
        var time = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        let result: Int32
        if ipv6 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            inet_pton(AF_INET6, host, &address.sin6_addr)
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
            }
        } else {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            inet_pton(AF_INET, host, &address.sin_addr)
            result = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        guard result == 0 else {
            close(fd)
            throw HTTPTestError.socket("connect: \(errno)")
        }
        return fd
    }

    /// Sends all of `bytes`; returns false when the peer closed first.
    @discardableResult
    static func send(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent <= 0 { return false }
            offset += sent
        }
        return true
    }

    /// One request on a new connection (`Connection: close`), read to the end.
    static func request(
        _ method: String, _ path: String, port: UInt16, token: String? = nil, headers: [String: String] = [:],
        body: String? = nil, host: String = "127.0.0.1"
    ) throws -> HTTPTestResponse {
        var lines = ["\(method) \(path) HTTP/1.1", "Host: test", "Connection: close"]
        if let token { lines.append("Authorization: Bearer \(token)") }
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { lines.append("\(name): \(value)") }
        let bodyBytes = Array((body ?? "").utf8)
        if body != nil, headers["Transfer-Encoding"] == nil { lines.append("Content-Length: \(bodyBytes.count)") }
        return try raw(Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8) + bodyBytes, port: port, host: host)
    }

    /// Sends `bytes` as they are and parses the answer read until the server closes.
    static func raw(_ bytes: [UInt8], port: UInt16, host: String = "127.0.0.1") throws -> HTTPTestResponse {
        let fd = try connect(port: port, host: host)
        defer { close(fd) }
        send(fd, bytes)
        return try parse(receiveAll(fd))
    }

    /// Everything `fd` receives until the peer closes its side (or the connection fails).
    static func receiveAll(_ fd: Int32) -> [UInt8] {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return received
    }

    /// Parses a complete response (Content-Length or chunked body).
    static func parse(_ bytes: [UInt8]) throws -> HTTPTestResponse {
        guard let end = headerEnd(bytes) else { throw HTTPTestError.malformed(String(decoding: bytes, as: UTF8.self)) }
        let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = head[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw HTTPTestError.malformed(head[0]) }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        var body = Array(bytes[(end + 4)...])
        if headers["transfer-encoding"]?.lowercased() == "chunked" {
            var decoder = ChunkedDecoder()
            body = decoder.feed(body)
        }
        return HTTPTestResponse(status: status, headers: headers, body: Data(body))
    }

    static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }
}

/// Decodes a chunked body as it arrives.
struct ChunkedDecoder {
    private var buffer: [UInt8] = []
    /// Whether the last (empty) chunk arrived.
    private(set) var finished = false

    /// Adds bytes; returns the body bytes they completed.
    mutating func feed(_ bytes: [UInt8]) -> [UInt8] {
        buffer += bytes
        var output: [UInt8] = []
        while !finished {
            guard let lineEnd = firstCRLF(from: 0) else { break }
            let sizeText = String(decoding: buffer[0..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { break }
            if size == 0 {
                finished = true
                break
            }
            let start = lineEnd + 2
            guard buffer.count >= start + size + 2 else { break }
            output += buffer[start..<(start + size)]
            buffer.removeFirst(start + size + 2)
        }
        return output
    }

    private func firstCRLF(from start: Int) -> Int? {
        guard buffer.count >= start + 2 else { return nil }
        for index in start..<(buffer.count - 1) where buffer[index] == 13 && buffer[index + 1] == 10 { return index }
        return nil
    }
}
