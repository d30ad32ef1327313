import FeedTestSupport
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Many `GET /api/events` clients on non-blocking sockets, multiplexed with `poll(2)` on the calling thread — never a
/// thread per stream. Nothing is read between calls of ``pump(timeout:until:)``: a test that stops pumping is a client
/// that stops reading.
///
/// Each stream may connect from its own loopback address (`bind(2)` to 127.x.y.z before `connect(2)`: Linux accepts
/// every 127.0.0.0/8 address), so the server sees several clients. A stream parses its answer's head, then its chunked
/// body as server-sent events (`id:`, `event:`, `data:`, `:` comments); an answer that is not a stream is read to the
/// connection's end (the request says `Connection: close`).
final class PolledStreams {
    /// One server-sent event.
    struct Event: Equatable {
        var id: String?
        var name: String?
        var data: String
    }

    /// One client: its socket, its request and what it received.
    struct Stream {
        /// The socket; -1 once closed.
        fileprivate(set) var fd: Int32
        fileprivate let request: [UInt8]
        fileprivate var sent = 0
        fileprivate var connected = false
        fileprivate var head: [UInt8] = []
        fileprivate var chunks = ChunkedDecoder()
        fileprivate var text: [UInt8] = []
        /// The answer's status, once its head arrived.
        fileprivate(set) var status: Int?
        /// The answer's headers, names lowercased.
        fileprivate(set) var headers: [String: String] = [:]
        /// The body of an answer that is not a stream.
        fileprivate(set) var body: [UInt8] = []
        /// The events received, in order (comments are only counted).
        fileprivate(set) var events: [Event] = []
        fileprivate(set) var comments = 0
        /// The server ended the stream or closed the connection.
        fileprivate(set) var ended = false
        /// Why the connection failed, if it did.
        fileprivate(set) var failure: String?
        /// The test hung up (``PolledStreams/hangUp(_:)``) or closed the socket.
        fileprivate(set) var closedByClient = false

        /// The seqs of the data events (unnamed, with an `id:`), in the order received.
        var seqs: [Int64] { events.compactMap { $0.name == nil ? $0.id.flatMap { Int64($0.prefix { $0 != "." }) } : nil } }

        /// The answer so far as a response (a refusal's body is complete once the stream ``ended``).
        var response: HTTPTestResponse? { status.map { HTTPTestResponse(status: $0, headers: headers, body: Data(body)) } }

        /// Whether the request was sent whole.
        var requestSent: Bool { sent == request.count }

        /// Whether the chunked body's last chunk arrived: the server ended the stream, rather than cut it off.
        var bodyFinished: Bool { chunks.finished }

        /// Whether the stream answered 200 and is still open on both sides.
        var isOpen: Bool { status == 200 && !ended && !closedByClient }
    }

    let port: UInt16
    private(set) var streams: [Stream] = []
    private var buffer = [UInt8](repeating: 0, count: 1 << 16)
    private var pollSet: [pollfd] = []
    private var pollIndices: [Int] = []

    init(port: UInt16) {
        self.port = port
    }

    deinit {
        for stream in streams where stream.fd >= 0 { Glibc.close(stream.fd) }
    }

    /// Starts `count` more streams (non-blocking connects; the requests go out as the sockets connect, during
    /// ``pump(timeout:until:)``) and returns their indices. `token(index)` is the stream's bearer token (`nil`: none);
    /// `source` is the client address to connect from; `receiveBuffer`, when given, is set as `SO_RCVBUF` before the
    /// connect, so that the server's window stays that small.
    @discardableResult
    func open(
        _ count: Int, token: (Int) -> String?, query: String = "", lastEventID: Int64? = nil, from source: String? = nil,
        receiveBuffer: Int? = nil
    ) throws -> Range<Int> {
        let first = streams.count
        for index in first..<(first + count) {
            var lines = ["GET /api/events\(query) HTTP/1.1", "Host: test", "Accept: text/event-stream", "Connection: close"]
            if let token = token(index) { lines.append("Authorization: Bearer \(token)") }
            if let lastEventID { lines.append("Last-Event-ID: \(lastEventID)") }
            let request = Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8)
            let fd = try LoopbackClient.connect(port: port, from: source, nonBlocking: true, receiveBuffer: receiveBuffer)
            streams.append(Stream(fd: fd, request: request))
        }
        return first..<(first + count)
    }

    /// Opens one more stream and waits, at most `timeout` seconds, for its answer: a stream's head (200), or another
    /// answer read to its end. Returns its index.
    func openOne(
        token: String?, query: String = "", lastEventID: Int64? = nil, from source: String? = nil, receiveBuffer: Int? = nil,
        timeout: Double = 20
    ) throws -> Int {
        let index = try open(
            1, token: { _ in token }, query: query, lastEventID: lastEventID, from: source, receiveBuffer: receiveBuffer
        ).lowerBound
        pump(timeout: timeout) { $0.streams[index].status == 200 || $0.streams[index].ended }
        return index
    }

    /// Reads and writes whatever the sockets are ready for until `predicate` holds, at most `timeout` seconds; returns
    /// whether it held. Waits in `poll(2)`, so it returns as soon as a socket's progress makes `predicate` true.
    @discardableResult
    func pump(timeout: Double, until predicate: (PolledStreams) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(timeout)
        while !predicate(self) {
            let remaining = deadline - .now
            guard remaining > .zero else { return false }
            pollSet.removeAll(keepingCapacity: true)
            pollIndices.removeAll(keepingCapacity: true)
            for (index, stream) in streams.enumerated() where stream.fd >= 0 {
                let writing = !stream.connected || stream.sent < stream.request.count
                pollSet.append(pollfd(fd: stream.fd, events: Int16(POLLIN) | (writing ? Int16(POLLOUT) : 0), revents: 0))
                pollIndices.append(index)
            }
            // Nothing left to read: nothing can change the streams any more.
            guard !pollSet.isEmpty else { return predicate(self) }
            let milliseconds = Int32(min(Double(Int32.max), max(1, remaining / .milliseconds(1))))
            let ready = poll(&pollSet, nfds_t(pollSet.count), milliseconds)
            if ready < 0, errno == EINTR { continue }
            guard ready >= 0 else { return predicate(self) }
            for slot in pollSet.indices where pollSet[slot].revents != 0 { service(pollIndices[slot]) }
        }
        return true
    }

    /// Sends each stream's FIN (`shutdown(SHUT_WR)`) — the client goes away — and keeps its socket to see the server
    /// close its side; the socket is closed then.
    func hangUp(_ indices: some Sequence<Int>) {
        for index in indices where streams[index].fd >= 0 {
            shutdown(streams[index].fd, Int32(SHUT_WR))
            streams[index].closedByClient = true
        }
    }

    /// Closes the sockets at once.
    func close(_ indices: some Sequence<Int>) {
        for index in indices where streams[index].fd >= 0 {
            Glibc.close(streams[index].fd)
            streams[index].fd = -1
            streams[index].closedByClient = true
        }
    }

    // MARK: - One socket

    private func service(_ index: Int) {
        let fd = streams[index].fd
        if !streams[index].connected {
            var error: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
            guard error == 0 else { return fail(index, "connect: errno \(error)") }
            streams[index].connected = true
        }
        while streams[index].sent < streams[index].request.count {
            let sent = streams[index].request[streams[index].sent...].withUnsafeBytes {
                send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
            guard sent > 0 else { return fail(index, "send: errno \(errno)") }
            streams[index].sent += sent
        }
        while streams[index].fd >= 0 {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
            guard count > 0 else { return finish(index, failure: count < 0 ? "recv: errno \(errno)" : nil) }
            consume(index, buffer[0..<count])
            if count < buffer.count { return }
        }
    }

    private func consume(_ index: Int, _ bytes: ArraySlice<UInt8>) {
        var body = bytes
        if streams[index].status == nil {
            streams[index].head += bytes
            guard let end = HTTPTestClient.headerEnd(streams[index].head) else { return }
            let head = streams[index].head
            let lines = String(decoding: head[..<end], as: UTF8.self).components(separatedBy: "\r\n")
            let statusParts = lines[0].split(separator: " ")
            guard statusParts.count >= 2, let status = Int(statusParts[1]) else { return fail(index, "a malformed head: \(lines[0])") }
            streams[index].status = status
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                streams[index].headers[line[..<colon].lowercased()] =
                    line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            streams[index].head = []
            body = head[(end + 4)...]
        }
        guard streams[index].headers["transfer-encoding"]?.lowercased() == "chunked" else {
            streams[index].body += body
            return
        }
        streams[index].text += streams[index].chunks.feed(Array(body))
        parseEvents(index)
        if streams[index].chunks.finished { finish(index, failure: nil) }
    }

    /// Takes every complete event (ended by a blank line) off the front of the stream's text.
    private func parseEvents(_ index: Int) {
        var start = streams[index].text.startIndex
        let text = streams[index].text
        var cursor = start
        while cursor + 1 < text.endIndex {
            guard text[cursor] == 10, text[cursor + 1] == 10 else {
                cursor += 1
                continue
            }
            let block = String(decoding: text[start..<cursor], as: UTF8.self)
            var event = Event(id: nil, name: nil, data: "")
            var isComment = true
            for line in block.split(separator: "\n") where !line.hasPrefix(":") {
                isComment = false
                if line.hasPrefix("id: ") { event.id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { event.name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { event.data += String(line.dropFirst(6)) }
            }
            if isComment { streams[index].comments += 1 } else { streams[index].events.append(event) }
            cursor += 2
            start = cursor
        }
        streams[index].text.removeFirst(start - text.startIndex)
    }

    private func fail(_ index: Int, _ why: String) {
        finish(index, failure: why)
    }

    private func finish(_ index: Int, failure: String?) {
        if streams[index].fd >= 0 { Glibc.close(streams[index].fd) }
        streams[index].fd = -1
        streams[index].ended = true
        if streams[index].failure == nil { streams[index].failure = failure }
    }
}

/// Blocking loopback connections from a chosen client address (127.x.y.z), for the per-address budget.
enum LoopbackClient {
    /// A TCP socket connected (or, `nonBlocking`, connecting) to 127.0.0.1:`port` from `source` (any port); blocking
    /// sockets get a receive timeout of `timeout` seconds.
    static func connect(
        port: UInt16, from source: String? = nil, nonBlocking: Bool = false, receiveBuffer: Int? = nil, timeout: Int = 20
    ) throws -> Int32 {
        var type = SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue
        if nonBlocking { type |= SOCK_NONBLOCK.rawValue }
        let fd = socket(AF_INET, Int32(type), 0)
        guard fd >= 0 else { throw HTTPTestError.socket("socket: errno \(errno)") }
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if !nonBlocking {
            var time = timeval(tv_sec: timeout, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        }
        if let source {
            var local = address(source, port: 0)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard bound == 0 else {
                let code = errno
                Glibc.close(fd)
                throw HTTPTestError.socket("bind \(source): errno \(code)")
            }
        }
        var remote = address("127.0.0.1", port: port)
        let result = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 || (nonBlocking && errno == EINPROGRESS) else {
            let code = errno
            Glibc.close(fd)
            throw HTTPTestError.socket("connect: errno \(code)")
        }
        return fd
    }

    /// One request from `source` on a new connection (`Connection: close`), read to the end.
    static func request(
        _ method: String, _ path: String, port: UInt16, from source: String, token: String? = nil
    ) throws -> HTTPTestResponse {
        var lines = ["\(method) \(path) HTTP/1.1", "Host: test", "Connection: close"]
        if let token { lines.append("Authorization: Bearer \(token)") }
        let fd = try connect(port: port, from: source)
        defer { Glibc.close(fd) }
        HTTPTestClient.send(fd, Array((lines.joined(separator: "\r\n") + "\r\n\r\n").utf8))
        return try HTTPTestClient.parse(HTTPTestClient.receiveAll(fd))
    }

    private static func address(_ host: String, port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }
}

/// `GET /metrics` as read by a test: each sample's value by its series (`name` or `name{labels}`, as printed).
struct MetricsPage {
    let text: String

    /// Fetches the page from loopback; fails unless it answers 200.
    static func fetch(port: UInt16) throws -> MetricsPage {
        let answer = try HTTPTestClient.request("GET", "/metrics", port: port)
        guard answer.status == 200 else { throw HTTPTestError.malformed("GET /metrics answered \(answer.status): \(answer.text)") }
        return MetricsPage(text: answer.text)
    }

    /// The value of one series, e.g. `feedsync_http_streams` or `feedsync_http_requests_total{route="like",status="200"}`.
    func value(_ series: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix(series + " ") {
            return Double(line.dropFirst(series.count + 1))
        }
        return nil
    }

    /// The samples' label names and values, one dictionary per sample line.
    var labelSets: [[String: String]] {
        text.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line in
            guard let open = line.firstIndex(of: "{"), let close = line.lastIndex(of: "}") else { return [:] }
            var labels: [String: String] = [:]
            for match in line[line.index(after: open)..<close].matches(of: #/([a-zA-Z_][a-zA-Z0-9_]*)="([^"]*)"/#) {
                labels[String(match.1)] = String(match.2)
            }
            return labels
        }
    }

    /// Waits, at most `timeout` seconds, until the page fetched anew satisfies `predicate`; returns the last page. Each
    /// round is one request: no pause between them.
    static func wait(port: UInt16, timeout: Double, until predicate: (MetricsPage) -> Bool) throws -> MetricsPage {
        let deadline = ContinuousClock.now + .seconds(timeout)
        var page = try fetch(port: port)
        while !predicate(page), ContinuousClock.now < deadline { page = try fetch(port: port) }
        return page
    }

    /// Prometheus' own checker: `promtool check metrics` must read the page without a complaint (exit 0, no output).
    /// Without promtool (Debian's `prometheus` package) the check fails under `CI=true` and is skipped otherwise.
    func checkWithPromtool(sourceLocation: SourceLocation = #_sourceLocation) throws {
        let promtool = "/usr/bin/promtool"
        guard FileManager.default.isExecutableFile(atPath: promtool) else {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                Issue.record("promtool missing: CI installs it (apt install prometheus)", sourceLocation: sourceLocation)
            } else {
                print("StreamBudgetTests: promtool check skipped, no \(promtool) (apt install prometheus)")
            }
            return
        }
        let run = try SpawnedProcess.run(promtool, ["check", "metrics"], environment: ["PATH": "/usr/bin:/bin"], input: text)
        #expect(run.status == 0, "promtool: \(run.stdout)\(run.stderr)", sourceLocation: sourceLocation)
        #expect((run.stdout + run.stderr).isEmpty, "promtool: \(run.stdout)\(run.stderr)", sourceLocation: sourceLocation)
    }
}

/// Fails a test that runs past its limit instead of letting it hang: after `limit` seconds it prints `label` and runs
/// `onFire` (killing the server ends every wait at once). ``finish()`` ends the watch.
final class Watchdog: Sendable {
    private let ended = DispatchSemaphore(value: 0)
    private let fired = LockedValue(false)

    init(_ label: String, limit: Double, onFire: @escaping @Sendable () -> Void = {}) {
        let (ended, fired) = (ended, fired)
        let thread = Thread {
            guard ended.wait(timeout: .now() + limit) == .timedOut else { return }
            print("\(label): the watchdog fired after \(Int(limit)) s")
            fired.withLock { $0 = true }
            onFire()
        }
        thread.name = "test-watchdog"
        thread.start()
    }

    /// Ends the watch; returns whether the watchdog had fired.
    @discardableResult
    func finish() -> Bool {
        ended.signal()
        return fired.withLock { $0 }
    }
}
