import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A client of `GET /api/events` on a thread of its own: it parses the stream as a browser's `EventSource` would and
/// records every event, comment and named event until the stream ends or ``close()`` is called. It sends its token as
/// `Authorization: Bearer TOKEN` (the stream is private: a viewer sees its own likes, other users' as counts).
final class EventFollower: @unchecked Sendable {
    /// One server-sent event.
    struct Event: Equatable {
        var id: String?
        var name: String?
        var data: String
    }

    // `@unchecked Sendable`: everything below is touched only with `condition` locked, except `fd` (set once in init).
    private let condition = NSCondition()
    private var events: [Event] = []
    private var comments = 0
    private var ended = false
    private var status: Int?
    private var headers: [String: String] = [:]
    private let fd: Int32

    /// Connects and sends the request with `token` (none: anonymous); the stream is read on a new thread.
    init(port: UInt16, token: String?, query: String = "", lastEventID: String? = nil, host: String = "127.0.0.1") throws {
        fd = try HTTPTestClient.connect(port: port, host: host, timeout: 60)
        var request = "GET /api/events\(query) HTTP/1.1\r\nHost: test\r\nAccept: text/event-stream\r\nConnection: close\r\n"
        if let token { request += "Authorization: Bearer \(token)\r\n" }
        if let lastEventID { request += "Last-Event-ID: \(lastEventID)\r\n" }
        HTTPTestClient.send(fd, Array((request + "\r\n").utf8))
        let thread = Thread { [self] in readLoop() }
        thread.name = "sse-follower"
        thread.start()
    }

    deinit {
        Glibc.close(fd)
    }

    /// Closes the connection from the client's side.
    func close() {
        shutdown(fd, Int32(SHUT_RDWR))
    }

    /// The events so far.
    var received: [Event] {
        condition.lock()
        defer { condition.unlock() }
        return events
    }

    /// The seqs of the data events so far.
    var seqs: [Int64] { received.compactMap { $0.name == nil ? $0.id.flatMap { Int64($0.prefix { $0 != "." }) } : nil } }

    /// Keep-alive comments so far.
    var commentCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return comments
    }

    /// The response's status and headers (lowercased names), once read.
    var response: (status: Int?, headers: [String: String]) {
        condition.lock()
        defer { condition.unlock() }
        return (status, headers)
    }

    /// Whether the stream ended (the server closed it or ended the chunked body).
    var isEnded: Bool {
        condition.lock()
        defer { condition.unlock() }
        return ended
    }

    /// Waits until `predicate` holds for the follower (re-checked on every change), at most `timeout` seconds.
    func wait(timeout: Double = 20, until predicate: (EventFollower) -> Bool) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        while !predicate(self) {
            condition.lock()
            let changed = condition.wait(until: min(deadline, Date(timeIntervalSinceNow: 0.2)))
            condition.unlock()
            if !changed, Date() >= deadline { return predicate(self) }
        }
        return true
    }

    private func readLoop() {
        var received: [UInt8] = []
        var headerDone = false
        var decoder = ChunkedDecoder()
        var text: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            var body: [UInt8]
            if !headerDone {
                received += buffer[0..<count]
                guard let end = HTTPTestClient.headerEnd(received) else { continue }
                headerDone = true
                if let parsed = try? HTTPTestClient.parse(Array(received[..<(end + 4)])) {
                    condition.lock()
                    status = parsed.status
                    headers = parsed.headers
                    condition.broadcast()
                    condition.unlock()
                }
                body = Array(received[(end + 4)...])
            } else {
                body = Array(buffer[0..<count])
            }
            if response.headers["transfer-encoding"] == "chunked" { body = decoder.feed(body) }
            text += body
            parseEvents(&text)
            if decoder.finished { break }
        }
        condition.lock()
        ended = true
        condition.broadcast()
        condition.unlock()
    }

    /// Takes every complete event (ended by a blank line) off the front of `text`.
    private func parseEvents(_ text: inout [UInt8]) {
        while let end = blankLine(in: text) {
            let block = String(decoding: text[..<end], as: UTF8.self)
            text.removeFirst(end + 2)
            var event = Event(id: nil, name: nil, data: "")
            var isComment = true
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                if line.hasPrefix(":") { continue }
                isComment = false
                if line.hasPrefix("id: ") { event.id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { event.name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { event.data += String(line.dropFirst(6)) }
            }
            condition.lock()
            if isComment { comments += 1 } else { events.append(event) }
            condition.broadcast()
            condition.unlock()
        }
    }

    private func blankLine(in text: [UInt8]) -> Int? {
        guard text.count >= 2 else { return nil }
        for index in 0..<(text.count - 1) where text[index] == 10 && text[index + 1] == 10 { return index }
        return nil
    }
}
