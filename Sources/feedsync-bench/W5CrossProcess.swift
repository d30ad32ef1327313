import FeedSync
import Foundation
import Synchronization

/// W5: a second process (`feedsync-bench agent-writer`) toggles likes at a fixed rate and prints `seq wallNanos`
/// after each commit; this process follows the database with a ``ChangeFeed`` and stamps each event's arrival on
/// `service.bridge.changes` with CLOCK_REALTIME. Then it measures its own CPU use while nothing changes.
///
/// `--rate R` (the default, R = 200) prints one line with the latencies and the idle CPU. `--rates 1,2,5,…`
/// sweeps: one writer per rate in turn, against the same database and feed, one line per rate, then one line with
/// the idle CPU and whether every rate passed.
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
        try args.finish()

        let directory = try TempDirectory()
        defer { directory.remove() }
        let path = directory.file("cross.sqlite")
        let service = try FeedService(location: path)
        try service.seed(SeedPlan(posts: posts, users: users, likes: 0))

        let stamps = Stamps()
        let subscription = service.bridge.changes.sink { stamps.arrived($0.seq) }
        let feed = ChangeFeed(service: service)
        try feed.start()

        var measurements: [Measurement] = []
        for rate in rates {
            if sweep != nil { note("w5: \(rate) changes/s for \(duration) s") }
            let measurement = try measure(
                rate: rate, seconds: duration, path: path, users: users, posts: posts, stamps: stamps)
            measurements.append(measurement)
            if sweep != nil {
                var line = JSONLine()
                line.add("workload", "w5")
                line.add("impl", "feedsync")
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
    static func measure(rate: Int, seconds: Int, path: String, users: Int, posts: Int, stamps: Stamps) throws -> Measurement {
        let count = rate * seconds
        stamps.resetCommits()
        // The writer: this same executable, `agent-writer`.
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let writer = Process()
        writer.executableURL = URL(fileURLWithPath: executable)
        writer.arguments = [
            "agent-writer", "--db", path, "--rate", "\(rate)", "--count", "\(count)",
            "--users", "\(users)", "--posts", "\(posts)",
        ]
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
