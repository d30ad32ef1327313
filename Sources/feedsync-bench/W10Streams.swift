import FeedSync
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// W10: `feedsync serve` holding many live event streams.
///
/// For each N of `--streams 1000,5000,10000`, on a fresh database and a fresh server: a database seeded with
/// `--posts 100` posts and `--users 50` users (no likes) and a token per user; `feedsync serve` (the executable beside
/// this one) as a child process with `--max-streams N+100 --max-connections-per-ip 0`. The bench raises its own limit
/// on open files to the hard limit (the server inherits it), then opens N `GET /api/events?after=HEAD` streams with the
/// users' tokens round robin, `--batch 200` at a time, all read by one epoll reader thread (``StreamHerd``); a batch
/// that takes over 60 s, or an opening over 300 s, fails the run. Then, with all N open:
///
/// - `--health 200` sequential `GET /health` on a connection of their own;
/// - `--likes 20` likes one at a time (`PUT /api/posts/{post}/like`, user k mod U on post k / U + 1, so each is new)
///   on another keep-alive connection, each once every stream has the one before; a like's delivery time at a stream
///   runs from writing the PUT to that stream decoding the event with the answer's seq.
///
/// Also measured: the server's CPU across the likes per delivered event (N × likes), its `VmRSS` and threads after
/// them, and `feedsync_stream_log_reads_total` from `GET /metrics` before and after them, per like (`null` when the
/// server has no such metric). Checked (`ok`): every stream opened; every stream received every like's seq once, in
/// order, and nothing else (no named event, no end) until the server was stopped; every `/health` answered 200; the
/// server exits 0 within 30 s of SIGTERM.
enum W10Streams {
    /// What every N's run shares.
    struct Plan {
        let posts: Int
        let users: Int
        let likes: Int
        let probes: Int
        let batch: Int
        /// Seconds a batch of streams may take to open, and all of them.
        let batchSeconds = 60.0
        let openSeconds = 300.0
    }

    static func run(_ args: Arguments) throws -> Bool {
        let counts = try args.intList("streams", [1000, 5000, 10_000])
        let plan = Plan(
            posts: try args.int("posts", 100), users: try args.int("users", 50), likes: try args.int("likes", 20),
            probes: try args.int("health", 200), batch: try args.int("batch", 200))
        let backend = try BackendChoice(args)
        try args.finish()
        guard plan.posts >= 1, plan.users >= 1, plan.batch >= 1 else { throw BenchError("--posts, --users and --batch must be 1 or more") }
        guard plan.likes >= 1, plan.likes <= plan.posts * plan.users else { throw BenchError("--likes must be 1 … posts × users") }
        guard backend.backgroundCheckpoints else {
            throw BenchError("w10's server checkpoints in the background (serve's default); --checkpoint inline does not apply")
        }
        let limit = raiseOpenFileLimit()
        let needed = (counts.max() ?? 0) + 100
        guard limit >= needed else {
            throw BenchError("w10 needs \(needed) open files and may open \(limit) (the hard limit, ulimit -Hn)")
        }

        var allOK = true
        for count in counts {
            note("w10: \(count) streams, \(plan.likes) likes, \(plan.probes) health probes")
            let outcome = try W10StreamsRun.measure(streams: count, plan: plan, backend: backend)
            allOK = allOK && outcome.ok
            var line = JSONLine()
            line.add("workload", "w10")
            line.add("impl", "feedsync")
            backend.addKeys(to: &line)
            line.add("streams", count)
            line.add("likes", plan.likes)
            line.add("health", plan.probes)
            line.add("posts", plan.posts)
            line.add("users", plan.users)
            line.add("seed_s", outcome.seedSeconds, digits: 3)
            line.add("open_seconds", outcome.openSeconds, digits: 3)
            line.add("deliver_p50_ms", millis(percentile: 50, of: outcome.deliveries), digits: 2)
            line.add("deliver_p99_ms", millis(percentile: 99, of: outcome.deliveries), digits: 2)
            line.add("deliver_max_ms", millis(percentile: 100, of: outcome.deliveries), digits: 2)
            line.add("health_p50_ms", millis(percentile: 50, of: outcome.healthLatencies), digits: 2)
            line.add("health_p99_ms", millis(percentile: 99, of: outcome.healthLatencies), digits: 2)
            line.add("server_rss_mib", outcome.serverRSS, digits: 1)
            line.add("server_threads", outcome.serverThreads.map(Double.init) ?? .nan, digits: 0)
            line.add("server_cpu_ms_per_event", outcome.serverCPUMillisPerEvent, digits: 4)
            line.add("log_reads_per_commit", outcome.logReadsPerCommit, digits: 2)
            line.add("server_exit", outcome.exitStatus.map(Double.init) ?? .nan, digits: 0)
            line.finish(ok: outcome.ok)
        }
        return allOK
    }

    /// A percentile of ascending nanoseconds, in milliseconds; NaN (`null`) when there are none.
    private static func millis(percentile p: Double, of sorted: [UInt64]) -> Double {
        sorted.isEmpty ? .nan : Double(percentile(sorted, p)) / 1e6
    }
}

/// Raises this process's soft limit on open files to its hard limit (children inherit it); returns the soft limit
/// in force.
func raiseOpenFileLimit() -> Int {
    let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    var limit = rlimit()
    guard getrlimit(resource, &limit) == 0 else { return 0 }
    if limit.rlim_cur < limit.rlim_max {
        var raised = limit
        raised.rlim_cur = limit.rlim_max
        if setrlimit(resource, &raised) == 0 { limit = raised }
    }
    return Int(clamping: limit.rlim_cur)
}

/// `GET path` on a connection of its own (`Connection: close`): the status and the body, read by `Content-Length`,
/// as chunks, or up to the close.
func fetchOnce(port: UInt16, path: String) throws -> (status: Int, body: [UInt8]) {
    let fd = try loopbackSocket(port: port, timeout: 30)
    defer { close(fd) }
    try sendAll(fd, Array("GET \(path) HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".utf8))
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    var status: Int?
    var length: Int?
    var chunked = false
    var bodyStart = 0
    var chunks = ChunkDecoder()
    var body: [UInt8] = []
    while true {
        let count = recv(fd, &buffer, buffer.count, 0)
        if count == 0 { break }
        guard count > 0 else { throw BenchError("GET \(path): recv: errno \(errno)") }
        received += buffer[0..<count]
        if status == nil, let head = headerEnd(received) {
            status = head >= 12 ? Int(String(decoding: received[9..<12], as: UTF8.self)) : nil
            guard status != nil else { throw BenchError("GET \(path): malformed status line") }
            let headers = String(decoding: received[..<head], as: UTF8.self).lowercased()
            chunked = headers.contains("\r\ntransfer-encoding: chunked")
            if let range = headers.range(of: "\r\ncontent-length:") {
                length = Int(headers[range.upperBound...].prefix { $0 != "\r" }.trimmingCharacters(in: .whitespaces))
            }
            bodyStart = head + 4
            if chunked { chunks.feed(received[bodyStart...], into: &body) }
        } else if status != nil, chunked {
            chunks.feed(buffer[0..<count], into: &body)
        }
        if status != nil, chunked ? chunks.finished : length.map({ received.count - bodyStart >= $0 }) ?? false { break }
    }
    guard let status else { throw BenchError("GET \(path): the server closed the connection before answering") }
    if !chunked { body = Array(received[bodyStart..<(length.map { bodyStart + $0 } ?? received.count)]) }
    return (status, body)
}

/// The sum of the samples named `name` (any labels) in a Prometheus text exposition, or `nil` when there are none.
func prometheusSum(_ text: String, _ name: String) -> Double? {
    var sum: Double?
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
        let nameEnd = line.firstIndex { $0 == "{" || $0 == " " } ?? line.endIndex
        guard line[..<nameEnd] == name, nameEnd < line.endIndex else { continue }
        var rest = line[nameEnd...]
        if rest.first == "{", let close = rest.lastIndex(of: "}") { rest = rest[rest.index(after: close)...] }
        guard let value = rest.split(separator: " ").first.flatMap({ Double($0) }) else { continue }
        sum = (sum ?? 0) + value
    }
    return sum
}

extension ServeChild {
    /// `Threads:` of the server's `/proc/PID/status`.
    func threadCount() -> Int? {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Threads:") }) else { return nil }
        return Int(line.dropFirst("Threads:".count).trimmingCharacters(in: .whitespaces))
    }
}
