import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Malformed and hostile requests for the flood tests, each with the answers it may get.
///
/// A request that is valid HTTP reaches the server's access handler, whose answers are JSON; one that is broken
/// framing is answered by libmicrohttpd (HTML) or its connection is closed without an answer.
struct HostileRequest {
    /// What the request tries.
    let kind: String
    let bytes: [UInt8]
    /// Closes the client's sending side after the bytes: a request that never completes ends at once instead of
    /// after the server's idle timeout.
    let halfClose: Bool
    /// The statuses it may get; `nil` in the set: the connection may be closed without an answer.
    let allowed: Set<Int?>
    /// Whether an answer must be the access handler's JSON error.
    let json: Bool

    /// The `index`th request of a flood: the kinds in turn, the random parts from `generator`. `token` is a valid
    /// token, so invalid JSON reaches the routes that need a user.
    static func make(_ index: Int, token: String, using generator: inout some RandomNumberGenerator) -> HostileRequest {
        func request(_ head: String, body: [UInt8] = [], length: Bool = true) -> [UInt8] {
            var lines = head + "\r\nHost: flood\r\nConnection: close\r\n"
            if length, !body.isEmpty { lines += "Content-Length: \(body.count)\r\n" }
            return Array((lines + "\r\n").utf8) + body
        }
        func random(_ range: ClosedRange<Int>) -> [UInt8] {
            (0..<Int.random(in: range, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        let auth = "Authorization: Bearer \(token)"
        let handler: Set<Int?> = [400, 404, 405, 413]
        switch index % 16 {
        case 0:
            return HostileRequest(kind: "random bytes", bytes: random(1...4096), halfClose: true, allowed: [nil, 400, 431], json: false)
        case 1:
            let line = Array("GET /api/feed?limit=5 HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
            let cut = Int.random(in: 1..<(line.count - 4), using: &generator)
            return HostileRequest(kind: "truncated request", bytes: Array(line[..<cut]), halfClose: true, allowed: [nil, 400], json: false)
        case 2:
            let method = ["BREW", "PATCH", "get", "OPTIONS", "TRACE", "CONNECT"].randomElement(using: &generator) ?? "BREW"
            let path = ["/health", "/api/feed", "/api/posts/p1/like", "/nowhere"].randomElement(using: &generator) ?? "/"
            return HostileRequest(
                kind: "bad method", bytes: request("\(method) \(path) HTTP/1.1"), halfClose: false, allowed: [404, 405], json: true)
        case 3:
            let path =
                [
                    "/../../etc/passwd", "/api/posts/..", "//", "/api//posts", "/api/posts/\(String(repeating: "a", count: 3000))",
                    "/api/posts/p1/like/again", "/api/feed/", "/%2e%2e/health", "/api/posts/\u{7F}",
                ].randomElement(using: &generator) ?? "/"
            return HostileRequest(
                kind: "absurd path", bytes: request("GET \(path) HTTP/1.1"), halfClose: false, allowed: [400, 404], json: true)
        case 4:
            let length = ["abc", "-5", "1 2", "0x10", "99999999999999999999999", ""].randomElement(using: &generator) ?? "x"
            let bytes = Array("POST /api/posts HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Length: \(length)\r\n\r\n{}".utf8)
            return HostileRequest(kind: "bad Content-Length", bytes: bytes, halfClose: true, allowed: [nil, 400, 413], json: false)
        case 5:
            let bytes = Array("POST /api/posts HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Length: 500\r\n\r\n{\"body\":".utf8)
            return HostileRequest(kind: "short body", bytes: bytes, halfClose: true, allowed: [nil, 400], json: false)
        case 6:
            let bytes = request("POST /api/posts HTTP/1.1\r\n\(auth)", body: Array(#"{"body":"no length"}"#.utf8), length: false)
            return HostileRequest(kind: "missing Content-Length", bytes: bytes, halfClose: false, allowed: [400], json: true)
        case 7:
            let path = ["/api/posts", "/api/sync/push", "/api/sync/pull"].randomElement(using: &generator) ?? "/api/posts"
            let limit = path == "/api/sync/push" ? 8 << 20 : 64 << 10
            let bytes = Array("POST \(path) HTTP/1.1\r\nHost: x\r\n\(auth)\r\nContent-Length: \(limit + 1)\r\n\r\n".utf8)
            return HostileRequest(kind: "declared body over the limit", bytes: bytes, halfClose: true, allowed: [413], json: true)
        case 8:
            let body = [UInt8](repeating: UInt8(ascii: "x"), count: (64 << 10) + Int.random(in: 1...8192, using: &generator))
            let bytes = request("POST /api/posts HTTP/1.1\r\n\(auth)", body: body)
            return HostileRequest(kind: "body over the limit", bytes: bytes, halfClose: false, allowed: [nil, 413], json: true)
        case 9:
            let path = ["/api/posts", "/api/sync/push", "/api/sync/pull"].randomElement(using: &generator) ?? "/api/posts"
            let bodies =
                ["{", "[1,2", "null", "{\"body\":12}", "\"text\"", "{\"body\":\"\u{0}", "{}{}"].map { Array($0.utf8) } + [random(1...300)]
            let body = bodies.randomElement(using: &generator) ?? [0]
            return HostileRequest(
                kind: "invalid JSON", bytes: request("POST \(path) HTTP/1.1\r\n\(auth)", body: body), halfClose: false, allowed: [400],
                json: true)
        case 10:
            let path = ["/nope", "/api", "/api/", "/api/postz", "/favicon.ico", "/api/events/x"].randomElement(using: &generator) ?? "/x"
            return HostileRequest(
                kind: "unknown route", bytes: request("GET \(path) HTTP/1.1"), halfClose: false, allowed: [404], json: true)
        case 11:
            let line =
                ["DELETE /health", "POST /api/feed", "GET /api/posts", "PUT /api/events", "GET /api/sync/push", "POST /"]
                .randomElement(using: &generator) ?? "POST /"
            return HostileRequest(kind: "wrong method", bytes: request("\(line) HTTP/1.1"), halfClose: false, allowed: [405], json: true)
        case 12:
            let path =
                [
                    "/api/posts/%zz", "/api/posts/%", "/api/posts/%ff%fe", "/api/feed?limit=%zz", "/api/feed?before=%ff",
                    "/api/posts/%00p1", "/api/events?after=%2", "/api/posts/p1%2Flike",
                ].randomElement(using: &generator) ?? "/%"
            // The event stream needs a token: without one its answer would be 401, whatever the parameters.
            let head = "GET \(path) HTTP/1.1" + (path.hasPrefix("/api/events") ? "\r\n\(auth)" : "")
            return HostileRequest(kind: "bad percent-encoding", bytes: request(head), halfClose: false, allowed: handler, json: true)
        case 13:
            let headers: String
            if Bool.random(using: &generator) {
                headers = (0..<3000).map { "X-Flood-\($0): value" }.joined(separator: "\r\n")
            } else {
                headers = "X-Big: " + String(repeating: "b", count: 40 << 10)
            }
            return HostileRequest(
                kind: "header flood", bytes: request("GET /health HTTP/1.1\r\n\(headers)"), halfClose: false, allowed: [nil, 431],
                json: false)
        case 14:
            let variants = [
                "GET /hea\u{0}lth HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                "GET /health HTTP/1.1\r\nHost: x\u{0}y\r\nConnection: close\r\n\r\n",
                "GET /health HTTP/1.1\r\nX-\u{0}: 1\r\nHost: x\r\nConnection: close\r\n\r\n",
                "\u{0}\u{0}\u{0}\r\n\r\n",
            ]
            let bytes = Array((variants.randomElement(using: &generator) ?? "\u{0}").utf8)
            return HostileRequest(kind: "NUL bytes", bytes: bytes, halfClose: true, allowed: [nil, 200, 400, 404], json: false)
        default:
            let length = [20_000, 40_000, 100_000].randomElement(using: &generator) ?? 40_000
            let path = "/api/posts/" + String(repeating: "%41", count: length / 3)
            return HostileRequest(
                kind: "very long URL", bytes: request("GET \(path) HTTP/1.1"), halfClose: false, allowed: [nil, 400, 404, 414, 431],
                json: false)
        }
    }

    /// What one raw exchange got: the status and headers, or `nil` when the connection closed without an answer.
    struct Outcome {
        var status: Int?
        var contentType: String?
        var body: String

        /// Whether the answer is the server's JSON error: `{"error": text, "code": text}`.
        var isJSONError: Bool {
            guard contentType == "application/json",
                let object = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any]
            else { return false }
            return object["error"] is String && object["code"] is String
        }
    }

    /// Sends the request on a new connection and reads until the server closes (at most `timeout` seconds).
    func send(port: UInt16, timeout: Int = 15) throws -> Outcome {
        let fd = try HTTPTestClient.connect(port: port, timeout: timeout)
        defer { close(fd) }
        HTTPTestClient.send(fd, bytes)
        if halfClose { shutdown(fd, Int32(SHUT_WR)) }
        let received = HTTPTestClient.receiveAll(fd)
        guard let response = try? HTTPTestClient.parse(received) else { return Outcome(status: nil, contentType: nil, body: "") }
        return Outcome(status: response.status, contentType: response.headers["content-type"], body: response.text)
    }
}

/// Figures of a process from `/proc/PID/status` and `/proc/PID/fd`.
enum ProcessFigures {
    /// The resident set size in KiB (`VmRSS`).
    static func residentKiB(_ pid: Int32) -> Int? { statusField(pid, "VmRSS") }

    /// The number of threads (`Threads`).
    static func threads(_ pid: Int32) -> Int? { statusField(pid, "Threads") }

    /// The number of open sockets.
    static func sockets(_ pid: Int32) -> Int {
        let directory = "/proc/\(pid)/fd"
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return entries.filter {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\($0)"))?.hasPrefix("socket:") == true
        }
        .count
    }

    private static func statusField(_ pid: Int32, _ name: String) -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(name + ":") {
            return Int(line.dropFirst(name.count + 1).trimmingCharacters(in: .whitespaces).split(separator: " ").first ?? "")
        }
        return nil
    }
}

/// Runs `body` on `count` new threads and returns a wait that ends (true) when all have finished, or (false) at the
/// deadline.
func startThreads(_ count: Int, name: String, _ body: @escaping @Sendable (Int) -> Void) -> @Sendable (Date) -> Bool {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        let thread = Thread {
            body(index)
            group.leave()
        }
        thread.name = "\(name)-\(index)"
        thread.start()
    }
    return { deadline in group.wait(timeout: .now() + max(0, deadline.timeIntervalSinceNow)) == .success }
}

/// A fixed-seed generator (SplitMix64), so a failing flood repeats.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}
