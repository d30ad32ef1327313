import FeedTestSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A real nginx in front of `feedsync serve` instances, running the configuration `Docs/HTTP.md` documents.
///
/// The block between the `nginx.conf begin` and `nginx.conf end` markers of the Deployment section is read as it is;
/// only the two upstream ports, the listen address and the certificate's paths are swapped, for the instances' real
/// ports, a free loopback port and a self-signed certificate made with `openssl` in the test's directory. Every
/// response through it carries `X-Test-Upstream` (nginx's `$upstream_addr`), so a test sees which instance answered.
final class NginxProxy: Sendable {
    /// Debian's nginx.
    static let executable = "/usr/sbin/nginx"
    /// The response header naming the instance (or instances, when nginx tried another) that answered.
    static let upstreamHeader = "x-test-upstream"

    /// The TLS port on 127.0.0.1.
    let port: UInt16
    /// The self-signed certificate nginx presents (for `curl --cacert`), issued to `localhost`.
    let certificate: String
    private let process: SpawnedProcess
    private let errors: LockedValue<String>
    private let reader: PipeReader
    private let stopped = LockedValue<(done: Bool, status: Int32?)>((false, nil))

    /// Makes a certificate, writes the configuration for `upstreams` (the two instances' ports) into `directory` and
    /// starts nginx; returns once it accepts connections (at most `timeout` seconds).
    init(upstreams: [UInt16], directory: TemporaryDirectory, timeout: Double = 30) throws {
        let prefix = directory.file("nginx")
        try FileManager.default.createDirectory(atPath: prefix + "/temp", withIntermediateDirectories: true)
        certificate = prefix + "/cert.pem"
        let key = prefix + "/key.pem"
        let made = try SpawnedProcess.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-days", "1",
                "-addext", "subjectAltName=DNS:localhost", "-keyout", key, "-out", certificate,
            ])
        guard made.status == 0 else { throw ServeError(description: "openssl req failed: \(made.stderr)") }
        let documented = try Self.documentedConfiguration()
        try Data(Self.mainConfiguration(prefix: prefix).utf8).write(to: URL(fileURLWithPath: prefix + "/nginx.conf"))

        // A free port may be taken by someone else before nginx binds it: then nginx exits, and another port is tried.
        var attempt = 1
        while true {
            let port = try Self.freePort()
            let site = try Self.substitute(documented, upstreams: upstreams, port: port, certificate: certificate, key: key)
            try Data(site.utf8).write(to: URL(fileURLWithPath: prefix + "/feedsync.conf"))
            let started = try Self.launch(prefix: prefix, port: port, timeout: timeout)
            if let process = started.process {
                (self.port, self.process, errors, reader) = (port, process, started.errors, started.reader)
                return
            }
            let log = started.errors.withLock { $0 }
            guard log.contains("Address already in use"), attempt < 3 else {
                throw ServeError(description: "nginx did not start on port \(port): \(log)")
            }
            attempt += 1
        }
    }

    /// Starts nginx with `prefix`'s configuration and waits until it accepts on `port`, connecting in a bounded loop;
    /// `process` is `nil` when it exited first (a configuration it refuses, a port taken) or the time ran out.
    private static func launch(
        prefix: String, port: UInt16, timeout: Double
    ) throws
        -> (process: SpawnedProcess?, errors: LockedValue<String>, reader: PipeReader)
    {
        let process = try SpawnedProcess(
            executable: executable, arguments: ["-e", "stderr", "-p", prefix, "-c", prefix + "/nginx.conf"],
            environment: ["PATH": "/usr/sbin:/usr/bin:/bin"], output: .null, error: .pipe, processGroup: true)
        let errors = LockedValue("")
        let reader = PipeReader(process.standardError!) { chunk in
            errors.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
        }
        let deadline = Date(timeIntervalSinceNow: timeout)
        while true {
            if let fd = try? HTTPTestClient.connect(port: port) {
                close(fd)
                return (process, errors, reader)
            }
            if !process.isRunning || Date() > deadline {
                process.send(SIGKILL, group: true)
                _ = process.waitUntilExit(timeout: 10)
                reader.waitForEnd(timeout: 10)
                return (nil, errors, reader)
            }
            sched_yield()
        }
    }

    deinit {
        stop()
    }

    /// What nginx wrote to its error log (standard error).
    var log: String { errors.withLock { $0 } }

    /// Gracefully stops nginx (SIGQUIT), then fast (SIGTERM), then kills its process group, each after a bounded
    /// wait; returns the exit status of the graceful or fast stop (`nil`: it had to be killed). Safe to call twice.
    @discardableResult
    func stop() -> Int32? {
        stopped.withLock { stopped in
            guard !stopped.done else { return stopped.status }
            var status: Int32?
            for signal in [SIGQUIT, SIGTERM] {
                process.send(signal)
                if process.waitUntilExit(timeout: 10) {
                    status = process.terminationStatus
                    break
                }
            }
            if status == nil {
                process.send(SIGKILL, group: true)
                _ = process.waitUntilExit(timeout: 10)
            }
            reader.waitForEnd(timeout: 10)
            stopped = (true, status)
            return status
        }
    }

    /// Kills nginx and its workers at once (a watchdog's last resort).
    func kill() {
        process.send(SIGKILL, group: true)
    }

    /// The nginx block of `Docs/HTTP.md`, between its marker comments, without the code fence.
    static func documentedConfiguration(filePath: String = #filePath) throws -> String {
        let root = URL(fileURLWithPath: filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("Docs/HTTP.md"), encoding: .utf8)
        let lines = text.components(separatedBy: "\n")
        guard let begin = lines.firstIndex(where: { $0.hasPrefix("<!-- nginx.conf begin") }),
            let end = lines[begin...].firstIndex(where: { $0.hasPrefix("<!-- nginx.conf end") }),
            lines[begin + 1] == "```nginx", lines[end - 1] == "```"
        else {
            throw ServeError(description: "Docs/HTTP.md has no ```nginx block between the nginx.conf begin and end markers")
        }
        return lines[(begin + 2)..<(end - 1)].joined(separator: "\n") + "\n"
    }

    /// `documented` with the upstream ports 8081 and 8082 replaced by `upstreams`, `listen 443 ssl` by
    /// `127.0.0.1:port` and the certificate's paths by the given ones; each must occur exactly once.
    static func substitute(
        _ documented: String, upstreams: [UInt16], port: UInt16, certificate: String, key: String
    ) throws
        -> String
    {
        let replacements = [
            ("server 127.0.0.1:8081;", "server 127.0.0.1:\(upstreams[0]);"),
            ("server 127.0.0.1:8082;", "server 127.0.0.1:\(upstreams[1]);"),
            ("listen 443 ssl;", "listen 127.0.0.1:\(port) ssl;"),
            ("/etc/ssl/feedsync/fullchain.pem;", certificate + ";"),
            ("/etc/ssl/feedsync/privkey.pem;", key + ";"),
        ]
        var text = documented
        for (old, new) in replacements {
            let count = text.components(separatedBy: old).count - 1
            guard count == 1 else { throw ServeError(description: "the documented nginx block has \(count) × '\(old)', not one") }
            text = text.replacingOccurrences(of: old, with: new)
        }
        return text
    }

    /// The main configuration around the documented block: in the foreground, one worker, every path inside `prefix`,
    /// no access log, and the answering instance in a response header.
    static func mainConfiguration(prefix: String) -> String {
        """
        \(getuid() == 0 ? "user root;" : "")
        daemon off;
        worker_processes 1;
        worker_shutdown_timeout 5s;
        pid \(prefix)/nginx.pid;
        error_log stderr warn;
        events { worker_connections 1024; }
        http {
            access_log off;
            client_body_temp_path \(prefix)/temp/client_body;
            proxy_temp_path \(prefix)/temp/proxy;
            fastcgi_temp_path \(prefix)/temp/fastcgi;
            uwsgi_temp_path \(prefix)/temp/uwsgi;
            scgi_temp_path \(prefix)/temp/scgi;
            add_header X-Test-Upstream $upstream_addr always;
            include \(prefix)/feedsync.conf;
        }

        """
    }

    private static func freePort() throws -> UInt16 { try FreePort.pick() }
}

/// `curl` as a child process, for HTTPS through ``NginxProxy`` (trusting its certificate) and plain HTTP to an
/// instance. The token reaches curl on standard input (`--config -`), never on its command line.
enum Curl {
    static let executable = "/usr/bin/curl"

    /// curl's arguments and its standard input for `url`: through `proxy` (HTTPS to `localhost`, resolved to
    /// 127.0.0.1) when given, else plain HTTP to `port`.
    static func invocation(
        _ method: String, _ path: String, proxy: NginxProxy?, port: UInt16?, token: String?, headers: [String: String],
        extra: [String]
    ) -> (arguments: [String], input: String) {
        var arguments = ["-q", "--config", "-", "--silent", "--show-error", "--noproxy", "*", "--dump-header", "-"]
        let url: String
        if let proxy {
            url = "https://localhost:\(proxy.port)\(path)"
            arguments += ["--cacert", proxy.certificate, "--resolve", "localhost:\(proxy.port):127.0.0.1"]
        } else {
            url = "http://127.0.0.1:\(port ?? 0)\(path)"
        }
        arguments += ["--request", method] + extra
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) { arguments += ["--header", "\(name): \(value)"] }
        var input = "url = \"\(url)\"\n"
        if let token { input += "header = \"Authorization: Bearer \(token)\"\n" }
        return (arguments, input)
    }

    /// One request, read to its end (at most 30 s).
    static func request(
        _ method: String, _ path: String, proxy: NginxProxy? = nil, port: UInt16? = nil, token: String? = nil,
        headers: [String: String] = [:]
    ) throws -> HTTPTestResponse {
        try PendingRequest(method, path, proxy: proxy, port: port, token: token, headers: headers).send()
    }

    /// A request whose `curl` is started ahead and waits for its URL and token on standard input, so that the time
    /// from ``send()`` to the answer holds no process start-up.
    final class PendingRequest: Sendable {
        private let process: SpawnedProcess
        private let input: String
        /// The method and path, for messages.
        let label: String
        private let errors = LockedValue("")
        private let errorReader: PipeReader

        /// Starts `curl` for the request; nothing is sent before ``send()``.
        init(
            _ method: String, _ path: String, proxy: NginxProxy? = nil, port: UInt16? = nil, token: String? = nil,
            headers: [String: String] = [:]
        ) throws {
            let (arguments, input) = invocation(
                method, path, proxy: proxy, port: port, token: token, headers: headers, extra: ["--max-time", "30"])
            process = try SpawnedProcess(executable: executable, arguments: arguments, environment: ["PATH": "/usr/bin:/bin"], input: .pipe)
            errorReader = PipeReader(process.standardError!) { [errors] chunk in
                errors.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
            }
            (self.input, label) = (input, "\(method) \(path)")
        }

        deinit {
            // Never sent: curl reads an empty configuration and exits.
            process.closeInput()
        }

        /// Sends the request and reads the answer to its end (curl gives up after 30 s).
        func send() throws -> HTTPTestResponse {
            process.write(input)
            process.closeInput()
            let output = readAll(process.standardOutput!)
            errorReader.waitForEnd()
            guard process.waitUntilExit(timeout: 30), process.terminationStatus == 0, let response = parseHead(Array(output))
            else {
                let text = String(decoding: output, as: UTF8.self)
                throw HTTPTestError.malformed("curl \(label): \(errors.withLock { $0 }) \(text)")
            }
            return HTTPTestResponse(status: response.status, headers: response.headers, body: Data(response.rest))
        }
    }

    /// Splits curl's `--dump-header -` output: the status and headers (names lowercased) of the last header block and
    /// the bytes after it; `nil` while the header block is incomplete.
    static func parseHead(_ bytes: [UInt8]) -> (status: Int, headers: [String: String], rest: [UInt8])? {
        guard let end = HTTPTestClient.headerEnd(bytes) else { return nil }
        let head = String(decoding: bytes[..<end], as: UTF8.self).components(separatedBy: "\r\n")
        let parts = head[0].split(separator: " ")
        guard parts.count >= 2, let status = Int(parts[1]) else { return nil }
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers, Array(bytes[(end + 4)...]))
    }
}

/// `GET /api/events` followed by a `curl` child process (through ``NginxProxy`` or directly to an instance), parsed as
/// a browser's `EventSource` would; every event is kept with the time it arrived.
final class CurlEventStream: Sendable {
    /// One server-sent event and when it arrived.
    struct Event: Sendable {
        var id: String?
        var name: String?
        var data: String
        var arrived: ContinuousClock.Instant
        /// The wall-clock time it arrived, to compare with the event's own `at` (its commit, on this machine's clock).
        var arrivedAt = Date()
    }

    /// What the stream received so far.
    struct Snapshot: Sendable {
        /// The response's status and headers (names lowercased), once they arrived.
        var status: Int?
        var headers: [String: String] = [:]
        var events: [Event] = []
        /// Whether curl's output ended (the stream was closed by either side).
        var ended = false

        /// The seqs of the data events.
        var seqs: [Int64] { events.compactMap { $0.name == nil ? $0.id.flatMap { Int64($0.prefix { $0 != "." }) } : nil } }
    }

    private let state = StreamState()
    private let process: SpawnedProcess
    private let reader: PipeReader
    private let errors = LockedValue("")
    private let errorReader: PipeReader

    /// Starts `curl` on `/api/events` with the token and, if given, `Last-Event-ID`; `query` is appended to the path.
    init(proxy: NginxProxy? = nil, port: UInt16? = nil, token: String, query: String = "", lastEventID: Int64? = nil) throws {
        var headers = ["Accept": "text/event-stream"]
        if let lastEventID { headers["Last-Event-ID"] = String(lastEventID) }
        let (arguments, input) = Curl.invocation(
            "GET", "/api/events" + query, proxy: proxy, port: port, token: token, headers: headers, extra: ["--no-buffer"])
        process = try SpawnedProcess(
            executable: Curl.executable, arguments: arguments, environment: ["PATH": "/usr/bin:/bin"], input: .pipe)
        process.write(input)
        process.closeInput()
        errorReader = PipeReader(process.standardError!) { [errors] chunk in
            errors.withLock { $0 += String(decoding: chunk, as: UTF8.self) }
        }
        let state = state
        reader = PipeReader(process.standardOutput!) { chunk in state.feed(Array(chunk)) }
        let watched = reader
        let thread = Thread {
            watched.waitForEnd(timeout: 86_400)
            state.finish()
        }
        thread.name = "curl-stream-end"
        thread.start()
    }

    deinit {
        close()
    }

    /// Ends the stream from the client's side (SIGTERM to curl) and waits, bounded, for curl to exit.
    func close() {
        process.terminate()
        _ = process.waitUntilExit(timeout: 10)
    }

    /// Kills curl at once (a watchdog's last resort).
    func kill() {
        process.send(SIGKILL)
    }

    /// What the stream received so far.
    var snapshot: Snapshot { state.snapshot }

    /// The seqs of the data events so far.
    var seqs: [Int64] { snapshot.seqs }

    /// What curl wrote to standard error.
    var curlErrors: String { errors.withLock { $0 } }

    /// Waits until `predicate` holds for what was received, checked on every change, at most `timeout` seconds;
    /// returns whether it held.
    func wait(timeout: Double = 20, until predicate: (Snapshot) -> Bool) -> Bool {
        state.wait(until: Date(timeIntervalSinceNow: timeout), predicate)
    }
}

/// The parser behind ``CurlEventStream``: curl's output (the header block, then the event stream) as it comes.
private final class StreamState: @unchecked Sendable {
    // `@unchecked Sendable`: `bytes` and `current` are touched only with `condition` locked.
    private let condition = NSCondition()
    private var bytes: [UInt8] = []
    private var current = CurlEventStream.Snapshot()

    var snapshot: CurlEventStream.Snapshot {
        condition.lock()
        defer { condition.unlock() }
        return current
    }

    func feed(_ chunk: [UInt8]) {
        let now = ContinuousClock.now
        condition.lock()
        defer { condition.unlock() }
        bytes += chunk
        if current.status == nil {
            guard let head = Curl.parseHead(bytes) else { return }
            (current.status, current.headers, bytes) = (head.status, head.headers, head.rest)
        }
        while let end = blankLine(in: bytes) {
            let block = String(decoding: bytes[..<end], as: UTF8.self)
            bytes.removeFirst(end + 2)
            var event = CurlEventStream.Event(id: nil, name: nil, data: "", arrived: now)
            var isComment = true
            for line in block.split(separator: "\n", omittingEmptySubsequences: false) where !line.hasPrefix(":") {
                isComment = false
                if line.hasPrefix("id: ") { event.id = String(line.dropFirst(4)) }
                if line.hasPrefix("event: ") { event.name = String(line.dropFirst(7)) }
                if line.hasPrefix("data: ") { event.data += String(line.dropFirst(6)) }
            }
            if !isComment { current.events.append(event) }
        }
        condition.broadcast()
    }

    func finish() {
        condition.lock()
        current.ended = true
        condition.broadcast()
        condition.unlock()
    }

    func wait(until deadline: Date, _ predicate: (CurlEventStream.Snapshot) -> Bool) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !predicate(current) {
            if !condition.wait(until: deadline) { return predicate(current) }
        }
        return true
    }

    private func blankLine(in text: [UInt8]) -> Int? {
        guard text.count >= 2 else { return nil }
        for index in 0..<(text.count - 1) where text[index] == 10 && text[index + 1] == 10 { return index }
        return nil
    }
}
