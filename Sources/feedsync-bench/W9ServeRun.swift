import FeedSync
import Foundation

/// W9's measured side: the clients and followers against a `feedsync serve` child process.
enum W9ServeRun {
    struct Outcome {
        var seedSeconds = 0.0
        var seconds = 0.0
        /// Every op's latency, ns, ascending.
        var latencies: [UInt64] = []
        var followersExact = false
        /// From the last answer to the last op's event at the slowest follower (negative: the event came first).
        var followersLagMillis = Double.nan
        var serverCPUSeconds = Double.nan
        var benchCPUSeconds = Double.nan
        var serverRSS = Double.nan
        var serverPeakRSS = Double.nan
        var exitStatus: Int32 = -1
        var ok = false
    }

    static func measure(_ plan: W9Plan, followers followerCount: Int, backend: BackendChoice) throws -> Outcome {
        var outcome = Outcome()
        let database = try CrossDatabase(backend)
        defer { database.remove() }

        // The database, seeded, with a token per client and one for the followers; closed before the server opens it.
        // The followers' user is the first who toggles nothing (client 0's when every user is a client): each like
        // reaches its streams as a `likeCountChanged`, with the like's seq.
        let start = monotonicNanos()
        var tokens: [String] = []
        let followerToken: String
        do {
            let service = try FeedService(location: database.location)
            defer { service.close() }
            try service.seed(SeedPlan(posts: plan.posts, users: plan.users, likes: 0))
            for client in 0..<plan.clients {
                tokens.append(try service.issueToken(userID: W9Plan.user(client), label: "w9").token)
            }
            followerToken = try service.issueToken(userID: W9Plan.user(plan.clients % plan.users), label: "w9-follower").token
        }
        outcome.seedSeconds = seconds(since: start)

        let server = try ServeChild(location: database.childLocation, password: database.password)
        // One connection per client, each checked with `GET /health` (which also gives the log's head).
        var connections: [KeepAliveConnection] = []
        var head: Int64 = -1
        for _ in 0..<plan.clients {
            let connection = try KeepAliveConnection(port: server.port)
            try connection.send("GET", "/health")
            let answer = try connection.receive()
            guard answer.status == 200, let lastSeq = jsonInteger(answer.body, "lastSeq") else {
                throw BenchError("GET /health answered \(answer.status): \(String(decoding: answer.body, as: UTF8.self))")
            }
            head = lastSeq
            connections.append(connection)
        }
        let followers = try (0..<followerCount).map { _ in try SSEFollower(port: server.port, after: head, token: followerToken) }
        for follower in followers where !follower.wait(timeout: 30, until: { $0.status != nil }) || follower.status != 200 {
            throw BenchError("GET /api/events answered \(follower.status.map(String.init) ?? "nothing")")
        }

        let serverCPUBefore = server.cpuSeconds()
        let benchCPUBefore = processCPUNanos()
        let run = BarrierThreads.run(threads: plan.clients, name: "w9-client") { [connections, tokens] index in
            toggleOverHTTP(plan: plan, client: index, connection: connections[index], token: tokens[index])
        }
        outcome.serverCPUSeconds = server.cpuSeconds() - serverCPUBefore
        outcome.benchCPUSeconds = Double(processCPUNanos() - benchCPUBefore) / 1e9
        outcome.seconds = run.seconds
        outcome.latencies = run.reports.flatMap(\.latencies).sorted()

        // The followers: every op's seq, once, in order, and nothing else.
        let opCount = plan.postsByClient.reduce(0) { $0 + $1.count }
        let last = head + Int64(opCount)
        for follower in followers { _ = follower.wait(timeout: 30) { ($0.seqs.last ?? 0) >= last || $0.isEnded } }
        let expectedSeqs = Array((head + 1)...last)
        let answered = run.reports.flatMap(\.seqs).sorted()
        outcome.followersExact = followers.allSatisfy { $0.seqs == expectedSeqs && $0.namedEvents.isEmpty }
        let arrivals = followers.compactMap { $0.arrival(of: last) }
        if arrivals.count == followers.count, let latest = arrivals.max() {
            outcome.followersLagMillis = (Double(latest) - Double(run.lastFinish)) / 1e6
        }
        if !outcome.followersExact {
            for (index, follower) in followers.enumerated() {
                let seqs = follower.seqs
                note("w9: follower \(index) saw \(seqs.count) events \(seqs.first ?? 0)…\(seqs.last ?? 0), expected \(opCount)")
            }
        }

        (outcome.serverRSS, outcome.serverPeakRSS) = server.memoryMegabytes()
        connections.removeAll()
        outcome.exitStatus = server.stop()
        for follower in followers {
            if !follower.wait(timeout: 10, until: { $0.isEnded }) { note("w9: an event stream outlived the server") }
            follower.close()
        }

        let service = try FeedService(location: database.location)
        defer { service.close() }
        let consistent = plan.check(run.reports, service: service, side: "serve")
        if answered != expectedSeqs { note("w9: the answers' seqs are not \(head + 1)…\(last)") }
        if outcome.exitStatus != 0 { note("w9: feedsync serve exited with \(outcome.exitStatus) after SIGTERM") }
        outcome.ok = consistent && answered == expectedSeqs && outcome.followersExact && outcome.exitStatus == 0
        return outcome
    }

    /// Client `client`'s ops over its connection: PUT when its user does not like the post, DELETE when it does.
    private static func toggleOverHTTP(plan: W9Plan, client: Int, connection: KeepAliveConnection, token: String) -> OpReport {
        var report = OpReport()
        report.latencies.reserveCapacity(plan.postsByClient[client].count)
        for post in plan.postsByClient[client] {
            let liking = !report.liked.contains(post)
            let method = liking ? "PUT" : "DELETE"
            let path = "/api/posts/post\(post)/like"
            let began = monotonicNanos()
            do {
                try connection.send(method, path, token: token)
                let answer = try connection.receive()
                report.latencies.append(monotonicNanos() - began)
                guard answer.status == 200, jsonBool(answer.body, "liked") == liking, jsonBool(answer.body, "changed") == true,
                    let seq = jsonInteger(answer.body, "seq")
                else {
                    report.failures.append("\(method) \(path): \(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
                    continue
                }
                report.record(post: post, liking: liking, seq: seq)
            } catch {
                report.failures.append("\(method) \(path): \(error)")
                break  // the connection is gone
            }
        }
        return report
    }
}
