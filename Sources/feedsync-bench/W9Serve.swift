import FeedSync
import Foundation

/// W9: W7's toggles through the real `feedsync serve`, measured beside the same toggles in-process.
///
/// Setup: a database seeded like W7's (no likes), a token per client user and one for the followers; then `feedsync
/// serve` (the executable beside this one) as a child process on a free loopback port. C clients (`--clients 16`) each
/// hold one keep-alive HTTP/1.1 connection on a thread of their own and act as one user (`user1` … `userC`): op i of
/// the toggle stream goes to client i mod C, which sends `PUT /api/posts/{post}/like` when its user does not like the
/// post and `DELETE` when it does, tracking its own set. F followers (`--followers 2`) read
/// `GET /api/events?after=HEAD` meanwhile, with the token of a user who toggles nothing. The timer runs from the start
/// barrier opening to the last client's last answer.
///
/// The peer, in the same run: the same ops from the same number of threads calling `FeedService.toggle` in-process on
/// a fresh identical database. Checked (`ok`): every answer is 200 and says what the client expected; every follower
/// saw exactly the ops' seqs (HEAD+1 … HEAD+N), once, in order; the database's likes equal the clients' sets; the
/// server exits 0 on SIGTERM; the peer's results and likes are the same.
enum W9Serve {
    static func run(_ args: Arguments) throws -> Bool {
        let posts = try args.int("posts", 10_000)
        let users = try args.int("users", 1_000)
        let opCount = try args.int("ops", 20_000)
        let clients = try args.int("clients", 16)
        let followers = try args.int("followers", 2)
        let backend = try BackendChoice(args)
        try args.finish()
        guard clients >= 1, clients <= users else { throw BenchError("--clients must be 1 … --users") }
        guard posts >= 1, opCount >= 1 else { throw BenchError("--posts and --ops must be 1 or more") }
        guard backend.backgroundCheckpoints else {
            throw BenchError("w9's server checkpoints in the background (serve's default); --checkpoint inline does not apply")
        }

        let plan = W9Plan(ops: opCount, users: users, posts: posts, clients: clients)
        note("w9: serve, \(clients) clients, \(followers) followers, \(opCount) toggles")
        let served = try W9ServeRun.measure(plan, followers: followers, backend: backend)
        note("w9: in-process peer, \(clients) threads")
        let peer = try measureInProcess(plan, backend: backend)

        let servedRate = Double(opCount) / max(served.seconds, 1e-9)
        let peerRate = Double(opCount) / max(peer.seconds, 1e-9)
        let ok = served.ok && peer.ok
        var line = JSONLine()
        line.add("workload", "w9")
        line.add("impl", "feedsync")
        backend.addKeys(to: &line)
        line.add("clients", clients)
        line.add("followers", followers)
        line.add("posts", posts)
        line.add("users", users)
        line.add("ops", opCount)
        line.add("seed_s", served.seedSeconds, digits: 3)
        line.add("serve_seconds", served.seconds, digits: 3)
        line.add("serve_toggles_per_s", servedRate, digits: 0)
        line.add("serve_p50_us", Double(percentile(served.latencies, 50)) / 1000, digits: 1)
        line.add("serve_p99_us", Double(percentile(served.latencies, 99)) / 1000, digits: 1)
        line.add("followers_exact", served.followersExact)
        line.add("followers_lag_ms", served.followersLagMillis, digits: 1)
        line.add("inprocess_seconds", peer.seconds, digits: 3)
        line.add("inprocess_toggles_per_s", peerRate, digits: 0)
        line.add("inprocess_p50_us", Double(percentile(peer.latencies, 50)) / 1000, digits: 1)
        line.add("inprocess_p99_us", Double(percentile(peer.latencies, 99)) / 1000, digits: 1)
        line.add("serve_vs_inprocess", servedRate / peerRate, digits: 3)
        line.add("server_cpu_s", served.serverCPUSeconds, digits: 3)
        line.add("bench_cpu_s", served.benchCPUSeconds, digits: 3)
        line.add("inprocess_cpu_s", peer.cpuSeconds, digits: 3)
        line.add("server_rss_mb", served.serverRSS, digits: 1)
        line.add("server_peak_rss_mb", served.serverPeakRSS, digits: 1)
        line.add("server_exit", Int(served.exitStatus))
        line.add("likes", plan.expected.liked.reduce(0) { $0 + $1.count })
        line.add("unlikes", plan.expected.unlikes)
        line.finish(ok: ok)
        return ok
    }

    /// The peer: the same ops from the same number of threads through `FeedService.toggle`, on a fresh database.
    private static func measureInProcess(
        _ plan: W9Plan, backend: BackendChoice
    ) throws -> (seconds: Double, latencies: [UInt64], cpuSeconds: Double, ok: Bool) {
        let database = try backend.makeDatabase(file: "inprocess.sqlite")
        defer { database.remove() }
        let service = try database.open()
        defer { service.close() }
        try service.seed(SeedPlan(posts: plan.posts, users: plan.users, likes: 0))
        for client in 0..<plan.clients { _ = try service.issueToken(userID: W9Plan.user(client), label: "w9") }

        let cpuBefore = processCPUNanos()
        let outcome = BarrierThreads.run(threads: plan.clients, name: "w9-inprocess") { index in
            let user = W9Plan.user(index)
            var report = OpReport()
            report.latencies.reserveCapacity(plan.postsByClient[index].count)
            for post in plan.postsByClient[index] {
                let liking = !report.liked.contains(post)
                let postID = "post\(post)"
                let began = monotonicNanos()
                do {
                    let result = try service.toggle(userID: user, postID: postID)
                    report.latencies.append(monotonicNanos() - began)
                    guard result.liked == liking, result.changed, let seq = result.seq else {
                        report.failures.append("\(user) \(postID): \(result)")
                        continue
                    }
                    report.record(post: post, liking: liking, seq: seq)
                } catch {
                    report.failures.append("\(user) \(postID): \(error)")
                }
            }
            return report
        }
        let cpuSeconds = Double(processCPUNanos() - cpuBefore) / 1e9
        let ok = plan.check(outcome.reports, service: service, side: "in-process")
        return (outcome.seconds, outcome.reports.flatMap(\.latencies).sorted(), cpuSeconds, ok)
    }
}

/// The ops of one W9 run, split among the clients, and what they must leave behind.
struct W9Plan: Sendable {
    let posts: Int
    let users: Int
    let clients: Int
    /// Client k's posts in op order: op i of the toggle stream (its post) is client i mod C's.
    let postsByClient: [[Int]]
    /// Each client's liked posts after its ops, and the number of unlikes among all ops.
    let expected: (liked: [Set<Int>], unlikes: Int)

    init(ops: Int, users: Int, posts: Int, clients: Int) {
        self.posts = posts
        self.users = users
        self.clients = clients
        var byClient = [[Int]](repeating: [], count: clients)
        for (i, pair) in ToggleStream(count: ops, users: users, posts: posts).pairs.enumerated() {
            byClient[i % clients].append(pair.post)
        }
        postsByClient = byClient
        var liked = [Set<Int>](repeating: [], count: clients)
        var unlikes = 0
        for (client, posts) in byClient.enumerated() {
            for post in posts where liked[client].insert(post).inserted == false {
                liked[client].remove(post)
                unlikes += 1
            }
        }
        expected = (liked, unlikes)
    }

    /// Client k's user id.
    static func user(_ client: Int) -> String { "user\(client + 1)" }

    /// Whether the threads' reports and the database agree with the plan: no failures, every thread's tracked set
    /// and the database's likes equal the simulation's, and the answers' seqs are distinct. Notes the first mismatch.
    func check(_ reports: [OpReport], service: FeedService, side: String) -> Bool {
        if let failure = reports.lazy.flatMap(\.failures).first {
            note("w9 \(side): \(reports.reduce(0) { $0 + $1.failures.count }) ops failed, first: \(failure)")
            return false
        }
        let seqs = reports.flatMap(\.seqs)
        guard Set(seqs).count == seqs.count else {
            note("w9 \(side): answers repeat a seq")
            return false
        }
        do {
            for client in 0..<clients {
                let stored = try service.likedPostIDs(userID: Self.user(client))
                let tracked = Set(reports[client].liked.map { "post\($0)" })
                guard reports[client].liked == expected.liked[client], stored == tracked else {
                    note("w9 \(side): \(Self.user(client)) likes \(stored.count) posts, tracked \(tracked.count)")
                    return false
                }
            }
            let likes = try service.status().likes
            guard likes == expected.liked.reduce(0, { $0 + $1.count }) else {
                note("w9 \(side): the database holds \(likes) likes")
                return false
            }
        } catch {
            note("w9 \(side): reading the database: \(error)")
            return false
        }
        return true
    }
}

extension OpReport {
    /// Tracks a successful op's effect on the thread's set.
    mutating func record(post: Int, liking: Bool, seq: Int64) {
        if liking {
            liked.insert(post)
        } else {
            liked.remove(post)
            unlikes += 1
        }
        seqs.append(seq)
    }
}
