import FeedSync
import Foundation
import Synchronization

#if PostgreSQL
    import FeedPostgresBackend
#endif

/// W5: a second process (`feedsync-bench agent-writer`) toggles likes at a fixed rate and prints `seq wallNanos`
/// after each commit; this process follows the database with a ``ChangeFeed`` and stamps each event's arrival on
/// `service.bridge.changes` with CLOCK_REALTIME. Then it measures its own CPU use while nothing changes.
///
/// `--rate R` (the default, R = 200) prints one line with the latencies and the idle CPU. `--rates 1,2,5,…`
/// sweeps: one writer per rate in turn, against the same database and feed, one line per rate, then one line with
/// the idle CPU and whether every rate passed.
///
/// `--db postgresql://…` runs on a fresh database on that server (dropped afterwards, `--keep` keeps it); the writer
/// gets the URL without its password on its command line and the password in `PGPASSWORD`. With
/// `--throughput-threads T` (PostgreSQL or SQLite) it measures instead how many toggles T threads of one service
/// commit per second while 0 or more other services follow the database with a ``ChangeFeed`` (`--listeners
/// 0,2`, alternated for `--rounds` rounds of `--seconds` each): one line per run.
enum W5CrossProcess {
    /// The sweep `--rates` runs when given without a list of its own (`--rates default`).
    static let defaultRates = [1, 2, 5, 10, 20, 50, 100, 200]

    /// Arrival stamps by seq (written by the change feed's thread) and the writer's commit stamps (by the pipe reader).
    final class Stamps: Sendable {
        private let arrivals = Mutex<[Int64: UInt64]>([:])
        private let commits = Mutex<[(seq: Int64, nanos: UInt64)]>([])

        func arrived(_ seq: Int64) {
            let now = realtimeNanos()
            arrivals.withLock { if $0[seq] == nil { $0[seq] = now } }
        }

        func committed(_ seq: Int64, _ nanos: UInt64) { commits.withLock { $0.append((seq, nanos)) } }

        /// Forgets the commits of the previous rate (arrivals are kept: seqs never repeat).
        func resetCommits() { commits.withLock { $0.removeAll() } }

        var arrivalsSnapshot: [Int64: UInt64] { arrivals.withLock { $0 } }
        var commitsSnapshot: [(seq: Int64, nanos: UInt64)] { commits.withLock { $0 } }

        /// Whether every acknowledged commit has arrived.
        var allArrived: Bool {
            let acked = commitsSnapshot
            return arrivals.withLock { arrivals in acked.allSatisfy { arrivals[$0.seq] != nil } }
        }
    }

    /// What one rate measured.
    struct Measurement {
        let rate: Int
        let events: Int
        let latencies: [Int64]
        let missed: Int
        /// This process's CPU use (user + system) while the writer ran, in % of one core.
        let cpuPercent: Double
        let ok: Bool

        func add(to line: inout JSONLine, seconds: Int) {
            line.add("rate", rate)
            line.add("seconds", seconds)
            line.add("events", events)
            line.add("p50_ms", Double(percentile(latencies, 50)) / 1e6, digits: 3)
            line.add("p99_ms", Double(percentile(latencies, 99)) / 1e6, digits: 3)
            line.add("max_ms", Double(latencies.last ?? 0) / 1e6, digits: 3)
            line.add("missed", missed)
            line.add("cpu_pct", cpuPercent, digits: 2)
        }
    }

    static func run(_ args: Arguments) throws -> Bool {
        let single = args.optionalString("rate")
        let sweep = args.optionalString("rates")
        let duration = try args.int("seconds", 10)
        let idleSeconds = try args.int("idle-seconds", 10)
        let users = try args.int("users", 1_000)
        let posts = try args.int("posts", 10_000)
        let rates: [Int]
        switch (single, sweep) {
        case (.some, .some):
            throw BenchError("give --rate R or --rates LIST, not both")
        case (_, .some("default")):
            rates = defaultRates
        case (_, .some(let list)):
            rates = list.split(separator: ",").compactMap { Int($0) }
            guard !rates.isEmpty, rates.count == list.split(separator: ",").count, rates.allSatisfy({ $0 > 0 }) else {
                throw BenchError("--rates needs positive integers like 1,10,100, or default")
            }
        case (_, .none):
            rates = [try args.int("rate", 200)]
        }
        let backend = try BackendChoice(args)
        let throughputThreads = try args.int("throughput-threads", 0)
        let listenerText = args.string("listeners", "0,2")
        let listenerCounts = listenerText.split(separator: ",").compactMap { Int($0) }.filter { $0 >= 0 }
        guard !listenerCounts.isEmpty, listenerCounts.count == listenerText.split(separator: ",").count else {
            throw BenchError("--listeners needs integers ≥ 0 like 0,2")
        }
        let rounds = try args.int("rounds", 3)
        try args.finish()

        let database = try CrossDatabase(backend)
        defer { database.remove() }
        let path = database.location
        let service = try FeedService(location: path)
        try service.seed(SeedPlan(posts: posts, users: users, likes: 0))
        // The seed's events reach the bridge before anything measured subscribes.
        service.waitForDelivery(through: try service.status().lastSeq, timeout: .seconds(600))
        if throughputThreads > 0 {
            return try measureThroughput(
                service: service, location: path, threads: throughputThreads, listenerCounts: listenerCounts, rounds: rounds,
                seconds: duration, users: users, posts: posts, backend: backend.name)
        }

        let stamps = Stamps()
        let subscription = service.bridge.changes.sink { stamps.arrived($0.seq) }
        let feed = ChangeFeed(service: service)
        try feed.start()

        var measurements: [Measurement] = []
        for rate in rates {
            if sweep != nil { note("w5: \(rate) changes/s for \(duration) s") }
            let measurement = try measure(
                rate: rate, seconds: duration, database: database, users: users, posts: posts, stamps: stamps)
            measurements.append(measurement)
            if sweep != nil {
                var line = JSONLine()
                line.add("workload", "w5")
                line.add("impl", "feedsync")
                line.add("backend", backend.name)
                measurement.add(to: &line, seconds: duration)
                line.finish(ok: measurement.ok)
            }
        }

        // Idle: nothing changes; the change feed keeps watching.
        usleep(500_000)
        let idleWallStart = monotonicNanos()
        let idleCPUStart = processCPUNanos()
        if idleSeconds > 0 { usleep(UInt32(idleSeconds) * 1_000_000) }
        let idleCPU = Double(processCPUNanos() - idleCPUStart)
        let idleWall = Double(monotonicNanos() - idleWallStart)
        let stillRunning = feed.isRunning

        feed.stop()
        subscription.cancel()

        let ok = stillRunning && measurements.allSatisfy(\.ok)
        var line = JSONLine()
        line.add("workload", "w5")
        line.add("impl", "feedsync")
        line.add("backend", backend.name)
        if sweep == nil, let measurement = measurements.first {
            measurement.add(to: &line, seconds: duration)
        } else {
            line.add("rates", rates.map(String.init).joined(separator: ","))
            line.add("seconds", duration)
        }
        line.add("idle_seconds", idleSeconds)
        line.add("idle_cpu_pct", idleWall > 0 ? idleCPU / idleWall * 100 : 0, digits: 3)
        line.finish(ok: ok)
        return ok
    }

    /// Runs one writer at `rate` for `seconds` and collects the latency of each acknowledged commit.
    static func measure(
        rate: Int, seconds: Int, database: CrossDatabase, users: Int, posts: Int, stamps: Stamps
    ) throws -> Measurement {
        let count = rate * seconds
        stamps.resetCommits()
        // The writer: this same executable, `agent-writer`.
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: executable)
        writer.arguments = [
            "agent-writer", "--db", database.childLocation, "--rate", "\(rate)", "--count", "\(count)",
            "--users", "\(users)", "--posts", "\(posts)",
        ]
        if let password = database.password {
            var environment = ProcessInfo.processInfo.environment
            environment["PGPASSWORD"] = password
            writer.environment = environment
        }
        let pipe = Pipe()
        writer.standardOutput = pipe
        let readerDone = DispatchSemaphore(value: 0)
        let handle = pipe.fileHandleForReading
        let reader = Thread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let text = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    let parts = text.split(separator: " ")
                    if parts.count == 2, let seq = Int64(parts[0]), let nanos = UInt64(parts[1]) {
                        stamps.committed(seq, nanos)
                    }
                }
            }
            readerDone.signal()
        }
        let wallStart = monotonicNanos()
        let cpuStart = processCPUNanos()
        try writer.run()
        reader.start()
        writer.waitUntilExit()
        readerDone.wait()
        let cpu = Double(processCPUNanos() - cpuStart)
        let wall = Double(monotonicNanos() - wallStart)
        let writerOK = writer.terminationStatus == 0

        // Events acknowledged by the writer get 2 s to arrive.
        let deadline = monotonicNanos() + 2_000_000_000
        while !stamps.allArrived, monotonicNanos() < deadline { usleep(10_000) }

        let arrivals = stamps.arrivalsSnapshot
        let commits = stamps.commitsSnapshot
        var latencies: [Int64] = []
        latencies.reserveCapacity(commits.count)
        var missed = 0
        for commit in commits {
            if let arrival = arrivals[commit.seq] {
                latencies.append(Int64(bitPattern: arrival &- commit.nanos))
            } else {
                missed += 1
            }
        }
        latencies.sort()
        let ok = writerOK && commits.count == count && missed == 0
        return Measurement(
            rate: rate, events: commits.count, latencies: latencies, missed: missed,
            cpuPercent: wall > 0 ? cpu / wall * 100 : 0, ok: ok)
    }
}

extension W5CrossProcess {
    /// Toggles per second from `threads` threads of `service` while `listeners` other services (standing for other
    /// machines) follow the database with a change feed; the listener counts alternate for `rounds` rounds.
    static func measureThroughput(
        service: FeedService, location: String, threads: Int, listenerCounts: [Int], rounds: Int, seconds: Int, users: Int,
        posts: Int, backend: String
    ) throws -> Bool {
        var allOK = true
        for round in 1...max(1, rounds) {
            for listeners in listenerCounts {
                let followers = try (0..<listeners).map { _ in try FeedService(location: location) }
                let received = Mutex(Array(repeating: 0, count: listeners))
                let subscriptions = followers.enumerated().map { index, follower in
                    follower.bridge.changes.sink { _ in received.withLock { $0[index] += 1 } }
                }
                let feeds = followers.map { ChangeFeed(service: $0) }
                for feed in feeds { try feed.start() }
                let ops = Mutex(0)
                let failures = Mutex(0)
                let stopAt = monotonicNanos() + UInt64(seconds) * 1_000_000_000
                let group = DispatchGroup()
                for thread in 0..<threads {
                    group.enter()
                    Thread {
                        var random = BenchRandom(seed: UInt64(1 + thread + 100 * round))
                        var done = 0
                        while monotonicNanos() < stopAt {
                            do {
                                _ = try service.toggle(userID: "user\(1 + random.next(users))", postID: "post\(1 + random.next(posts))")
                                done += 1
                            } catch {
                                failures.withLock { $0 += 1 }
                            }
                        }
                        ops.withLock { $0 += done }
                        group.leave()
                    }.start()
                }
                group.wait()
                let total = ops.withLock { $0 }
                // The followers catch up (at most 10 s) before they stop.
                let deadline = monotonicNanos() + 10_000_000_000
                while received.withLock({ $0.contains { $0 < total } }), monotonicNanos() < deadline { usleep(10_000) }
                let lagging = received.withLock { $0.filter { $0 < total }.count }
                for feed in feeds { feed.stop() }
                subscriptions.forEach { $0.cancel() }
                for follower in followers { follower.close() }
                let ok = failures.withLock { $0 } == 0 && lagging == 0
                allOK = allOK && ok
                var line = JSONLine()
                line.add("workload", "w5")
                line.add("mode", "throughput")
                line.add("backend", backend)
                line.add("threads", threads)
                line.add("listeners", listeners)
                line.add("round", round)
                line.add("seconds", seconds)
                line.add("ops", total)
                line.add("ops_per_s", Double(total) / Double(seconds), digits: 1)
                line.add("failures", failures.withLock { $0 })
                line.add("lagging_listeners", lagging)
                line.finish(ok: ok)
            }
        }
        return allOK
    }
}

/// W5's database — ``BenchDatabase`` — plus what the writer process is given: the location without its password
/// on its command line, and the password apart (for its `PGPASSWORD`).
final class CrossDatabase {
    private let database: BenchDatabase
    /// What this process opens (with the password, for PostgreSQL).
    var location: String { database.location }
    /// What the writer process is given on its command line: without the password.
    let childLocation: String
    /// The password, for the writer's `PGPASSWORD`.
    let password: String?

    init(_ backend: BackendChoice) throws {
        database = try backend.makeDatabase(file: "cross.sqlite")
        childLocation = FeedLocation.redacted(database.location)
        let components = backend.serverURL == nil ? nil : URLComponents(string: database.location)
        password = components?.password ?? components?.queryItems?.first { $0.name == "password" }?.value
    }

    /// Deletes the directory, or drops the database unless `--keep` was given.
    func remove() {
        database.remove()
    }
}
