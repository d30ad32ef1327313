import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// `feedsync serve` as a child process flooded with malformed requests while valid clients keep using it: every
/// hostile request gets a sensible answer or a closed connection, the valid ones all succeed, the event stream stays
/// exact, and the server's memory, sockets and threads come back.
// Blocks: waits for a `feedsync serve` child process, its event stream and its socket counts under floods of requests.
@Suite(.ownThreads, .heavy) struct HostileInputTests {
    static let users = ["u1", "u2", "u3", "u4"]

    /// What the valid clients saw while the floods ran.
    struct Traffic {
        var toggles = 0
        var toggleFailures: [String] = []
        var seqs: [Int64] = []
        var health = 0
        var healthFailures: [String] = []
        var running = true
    }

    @Test func floodsOfMalformedRequestsLeaveValidClientsAndMemoryIntact() throws {
        let deadline = Date(timeIntervalSinceNow: 300)
        let dir = TemporaryDirectory("feedsync-hostile")
        let database = dir.file("feed.sqlite")
        let setup = try FeedService(location: database)
        for (index, user) in Self.users.enumerated() {
            try setup.createUser(id: user)
            try setup.createPost(id: "p\(index + 1)", authorID: user, body: "post \(index + 1)")
        }
        setup.close()
        let tokens = try Self.users.map { user in
            let issued = try ChildProcess.run(["--db", database, "token", "issue", "--user", user], home: dir.path)
            try #require(issued.status == 0, "\(issued.stderr)")
            return issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let server = try ServeProcess(database: database, home: dir.path)
        defer { server.stop() }
        let port = server.port
        let startSeq = try #require(try HTTPTestClient.request("GET", "/health", port: port).json["lastSeq"] as? Int)
        let follower = try EventFollower(port: port, token: tokens[0], query: "?after=\(startSeq)")
        defer { follower.close() }
        #expect(follower.wait { $0.response.status == 200 })

        // Warm-up: one small flood, so the baseline includes the threads' stacks and the allocator's arenas.
        let warmUp = try flood(port: port, requests: 320, seed: 1, token: tokens[0], deadline: deadline)
        #expect(warmUp.failures.count == 0, "\(warmUp.failures.prefix(5))")
        let sockets = ProcessFigures.sockets(server.pid)
        let threads = try #require(ProcessFigures.threads(server.pid))
        let baseline = try #require(ProcessFigures.residentKiB(server.pid))

        let traffic = LockedValue(Traffic())
        let clients = startThreads(Self.users.count + 1, name: "valid-client") { index in
            if index == Self.users.count {
                Self.pollHealth(port: port, traffic: traffic, deadline: deadline)
            } else {
                Self.toggle(port: port, token: tokens[index], post: "p\(index + 1)", traffic: traffic, deadline: deadline)
            }
        }
        var resident: [Int] = []
        var floods: [FloodResult] = []
        for seed in [2, 3] as [UInt64] {
            let started = Date()
            let result = try flood(port: port, requests: Self.floodSize, seed: seed, token: tokens[1], deadline: deadline)
            let seconds = Date().timeIntervalSince(started)
            floods.append(result)
            #expect(server.isAlive, "the server died during a flood: \(server.log)")
            resident.append(try #require(ProcessFigures.residentKiB(server.pid)))
            print(
                "hostile flood \(seed - 1): \(Self.floodSize) requests in \(String(format: "%.1f", seconds)) s (\(Int(Double(Self.floodSize) / seconds))/s), RSS \(resident.last ?? 0) KiB"
            )
        }
        traffic.withLock { $0.running = false }
        #expect(clients(deadline), "the valid clients did not finish")

        for result in floods {
            #expect(result.failures.count == 0, "unexpected answers: \(result.failures.prefix(10))")
            print("hostile answers: \(result.statuses.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " "))")
        }
        let seen = traffic.withLock { $0 }
        #expect(seen.toggleFailures.count == 0, "\(seen.toggleFailures.prefix(5))")
        #expect(seen.healthFailures.count == 0, "\(seen.healthFailures.prefix(5))")
        #expect(seen.toggles > 0 && seen.health > 0)
        let committed = seen.seqs.sorted()
        #expect(Set(committed).count == committed.count, "a seq was answered twice")
        #expect(follower.wait(timeout: 30) { $0.seqs.count >= committed.count })
        #expect(follower.seqs == committed, "the follower saw \(follower.seqs.count) events for \(committed.count) commits")
        #expect(try HTTPTestClient.request("GET", "/health", port: port).status == 200)

        // The connections the floods opened are closed and their threads gone (bounded wait: closing is async).
        // One sample of both per check: a thread the server starts for a moment (a GCD worker) between two samples is
        // not a leak; counts that stay above the baseline for 20 s are. A request now and then wakes the server's
        // loop, which reaps finished connection threads; the samples after it give its own connection a second to
        // close, so that it is not counted.
        let settled = Date(timeIntervalSinceNow: 20)
        var after = (sockets: ProcessFigures.sockets(server.pid), threads: ProcessFigures.threads(server.pid) ?? .max)
        while Date() < settled, after.sockets > sockets || after.threads > threads {
            _ = try HTTPTestClient.request("GET", "/health", port: port)
            _ = eventually(seconds: 1) {
                after = (ProcessFigures.sockets(server.pid), ProcessFigures.threads(server.pid) ?? .max)
                return after.sockets <= sockets && after.threads <= threads
            }
        }
        #expect(after.sockets <= sockets, "sockets: \(after.sockets), before \(sockets)")
        #expect(after.threads <= threads, "threads: \(after.threads), before \(threads)")
        print(
            "hostile RSS: baseline \(baseline) KiB after warm-up, \(resident.map { "+\($0 - baseline)" }.joined(separator: " / ")) KiB "
                + "after the floods; \(seen.toggles) toggles, \(seen.health) health checks meanwhile")
        for figure in resident { #expect(figure - baseline < 40 << 10, "RSS grew from \(baseline) to \(figure) KiB") }
        #expect(server.stop() == 0, "\(server.log)")
    }

    // MARK: - Clients

    struct FloodResult {
        var statuses: [String: Int] = [:]
        var failures: [String] = []
    }

    /// Requests per flood: two floods and a warm-up make thousands, while the rest of the suite runs on the same cores.
    static let floodSize = 1_500

    /// Sends `requests` hostile requests from 3 threads and checks each answer against what its kind allows.
    private func flood(port: UInt16, requests: Int, seed: UInt64, token: String, deadline: Date) throws -> FloodResult {
        let result = LockedValue(FloodResult())
        let threads = 3
        let done = startThreads(threads, name: "flood") { thread in
            var generator = SeededGenerator(state: seed &* 1000 &+ UInt64(thread))
            for index in stride(from: thread, to: requests, by: threads) where Date() < deadline {
                let request = HostileRequest.make(index, token: token, using: &generator)
                var failure: String?
                let key: String
                do {
                    let outcome = try request.send(port: port)
                    key = outcome.status.map(String.init) ?? "closed"
                    if !request.allowed.contains(outcome.status) {
                        failure = "\(request.kind): \(key) \(outcome.body.prefix(120))"
                    } else if request.json, outcome.status != nil, !outcome.isJSONError {
                        failure = "\(request.kind): \(key) is not a JSON error: \(outcome.body.prefix(120))"
                    }
                } catch {
                    key = "error"
                    failure = "\(request.kind): \(error)"
                }
                result.withLock {
                    $0.statuses[key, default: 0] += 1
                    if let failure { $0.failures.append(failure) }
                }
            }
        }
        try #require(done(deadline), "the flood did not finish before the deadline")
        return result.withLock { $0 }
    }

    /// Likes and unlikes `post` in turn until `running` is false; every answer must be 200 with a seq.
    private static func toggle(
        port: UInt16, token: String, post: String, traffic: LockedValue<Traffic>, deadline: Date
    ) {
        var like = true
        while traffic.withLock({ $0.running }), Date() < deadline {
            let answer = try? HTTPTestClient.request(like ? "PUT" : "DELETE", "/api/posts/\(post)/like", port: port, token: token)
            let seq = (answer?.json["seq"] as? NSNumber)?.int64Value
            traffic.withLock { traffic in
                traffic.toggles += 1
                if let answer, answer.status == 200, answer.json["changed"] as? Bool == true, let seq {
                    traffic.seqs.append(seq)
                } else {
                    traffic.toggleFailures.append("\(post) \(like): \(answer?.status ?? 0) \(answer?.text ?? "no answer")")
                }
            }
            like.toggle()
        }
    }

    /// Asks `/health` until `running` is false; every answer must be 200.
    private static func pollHealth(port: UInt16, traffic: LockedValue<Traffic>, deadline: Date) {
        while traffic.withLock({ $0.running }), Date() < deadline {
            let answer = try? HTTPTestClient.request("GET", "/health", port: port)
            traffic.withLock { traffic in
                traffic.health += 1
                if answer?.status != 200 { traffic.healthFailures.append("\(answer?.status ?? 0) \(answer?.text ?? "no answer")") }
            }
        }
    }
}
