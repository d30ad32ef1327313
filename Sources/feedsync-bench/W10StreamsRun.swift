import FeedSync
import Foundation

/// One N of W10: a fresh database and server, N streams, the health probes and the likes.
enum W10StreamsRun {
    struct Outcome {
        var seedSeconds = Double.nan
        var openSeconds = Double.nan
        /// Every (stream, like) delivery time, ns, ascending.
        var deliveries: [UInt64] = []
        /// Every `/health` latency, ns, ascending.
        var healthLatencies: [UInt64] = []
        var serverRSS = Double.nan
        var serverThreads: Int?
        var serverCPUMillisPerEvent = Double.nan
        var logReadsPerCommit = Double.nan
        var exitStatus: Int32?
        var ok = false
    }

    /// The metric whose growth per like says how often the server read the log for its streams.
    static let logReadsMetric = "feedsync_stream_log_reads_total"

    static func measure(streams count: Int, plan: W10Streams.Plan, backend: BackendChoice) throws -> Outcome {
        var outcome = Outcome()
        let database = try CrossDatabase(backend)
        defer { database.remove() }

        // The database, seeded, with a token per user; closed before the server opens it.
        let start = monotonicNanos()
        var tokens: [String] = []
        do {
            let service = try FeedService(location: database.location)
            defer { service.close() }
            try service.seed(SeedPlan(posts: plan.posts, users: plan.users, likes: 0))
            for user in 1...plan.users { tokens.append(try service.issueToken(userID: "user\(user)", label: "w10").token) }
        }
        outcome.seedSeconds = seconds(since: start)

        let server = try ServeChild(
            location: database.childLocation, password: database.password,
            serveArguments: ["--max-streams", String(count + 100), "--max-connections-per-ip", "0"])
        let answer = try fetchOnce(port: server.port, path: "/health")
        guard answer.status == 200, let head = jsonInteger(answer.body[...], "lastSeq") else {
            throw BenchError("GET /health answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
        }

        let opened = monotonicNanos()
        let herd = try StreamHerd(
            port: server.port, after: head, tokens: tokens, count: count, batch: plan.batch, batchSeconds: plan.batchSeconds,
            totalSeconds: plan.openSeconds)
        let open = herd.waitOpen(timeout: plan.openSeconds + 10)
        var measured = false
        if open.opened == count {
            outcome.openSeconds = seconds(since: opened)
            measured = measureOpen(server: server, herd: herd, tokens: tokens, plan: plan, into: &outcome)
        } else {
            note("w10: \(open.failure ?? "\(open.opened) of \(count) streams open after the time bound")")
        }

        // No stream may end until the server stops, nor break the order at all.
        let early = herd.problems()
        if let end = early.firstEnd { note("w10: \(early.ended) streams ended early, first: \(end)") }
        outcome.exitStatus = server.stop(within: 30)
        if outcome.exitStatus != 0 {
            note("w10: feedsync serve " + (outcome.exitStatus.map { "exited with \($0)" } ?? "ran on 30 s after SIGTERM"))
        }
        let ending = herd.waitAllEnded(timeout: 10)
        if ending.ended < ending.opened { note("w10: \(ending.opened - ending.ended) of \(ending.opened) streams outlived the server") }
        herd.close()
        let problems = herd.problems()
        if let violation = problems.firstViolation { note("w10: \(problems.violations) bad events, first: \(violation)") }
        outcome.ok = measured && problems.violations == 0 && early.ended == 0 && outcome.exitStatus == 0
        return outcome
    }

    /// The phases with every stream open: health probes, then the likes. Returns whether every probe and like
    /// succeeded and every stream received every like.
    private static func measureOpen(
        server: ServeChild, herd: StreamHerd, tokens: [String], plan: W10Streams.Plan, into outcome: inout Outcome
    ) -> Bool {
        do {
            // Fresh connections: one that waited through the opening could have hit the server's idle timeout.
            let probe = try KeepAliveConnection(port: server.port)
            var latencies: [UInt64] = []
            for _ in 0..<plan.probes {
                let began = monotonicNanos()
                try probe.send("GET", "/health")
                let answer = try probe.receive()
                latencies.append(monotonicNanos() - began)
                guard answer.status == 200 else {
                    note("w10: GET /health answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
                    return false
                }
            }
            outcome.healthLatencies = latencies.sorted()

            let readsBefore = try logReads(port: server.port)
            let cpuBefore = server.cpuSeconds()
            let liker = try KeepAliveConnection(port: server.port)
            var deliveries: [UInt64] = []
            deliveries.reserveCapacity(herd.count * plan.likes)
            for like in 0..<plan.likes {
                let user = like % plan.users
                let path = "/api/posts/post\(like / plan.users + 1)/like"
                let sent = monotonicNanos()
                try liker.send("PUT", path, token: tokens[user])
                let answer = try liker.receive()
                guard answer.status == 200, jsonBool(answer.body, "changed") == true, let seq = jsonInteger(answer.body, "seq") else {
                    note("w10: PUT \(path) answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
                    return false
                }
                let reached = herd.waitForSeq(seq, timeout: 30)
                guard reached == herd.count else {
                    note("w10: like \(like + 1) (seq \(seq)) reached \(reached) of \(herd.count) streams")
                    return false
                }
                deliveries += herd.arrivals(of: seq).map { $0 &- sent }
            }
            let cpu = server.cpuSeconds() - cpuBefore
            let readsAfter = readsBefore == nil ? nil : try logReads(port: server.port)
            outcome.deliveries = deliveries.sorted()
            outcome.serverCPUMillisPerEvent = cpu * 1000 / Double(herd.count * plan.likes)
            if let readsBefore, let readsAfter { outcome.logReadsPerCommit = (readsAfter - readsBefore) / Double(plan.likes) }
            outcome.serverRSS = server.memoryMegabytes().rss
            outcome.serverThreads = server.threadCount()
            return true
        } catch {
            note("w10: \(error)")
            return false
        }
    }

    /// `feedsync_stream_log_reads_total` from `GET /metrics`, or `nil` (noted) when the server has no such metric.
    private static func logReads(port: UInt16) throws -> Double? {
        let answer = try fetchOnce(port: port, path: "/metrics")
        guard answer.status == 200 else {
            note("w10: GET /metrics answered \(answer.status); log_reads_per_commit is null")
            return nil
        }
        guard let value = prometheusSum(String(decoding: answer.body, as: UTF8.self), logReadsMetric) else {
            note("w10: GET /metrics has no \(logReadsMetric); log_reads_per_commit is null")
            return nil
        }
        return value
    }
}
