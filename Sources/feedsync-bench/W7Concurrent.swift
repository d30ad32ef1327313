import FeedSync
import Foundation
import Synchronization

/// W7: W1's toggles from T OS threads at once, each op one `FeedService.toggle` call (one command that returns
/// only after its commit). Thread k makes ops i with i % T == k, in increasing i; the timer runs from the start
/// barrier opening (the first thread leaving it) to the last thread finishing.
///
/// `--threads 1,4,16` runs each thread count in turn, each on a fresh database, and prints one line per count.
/// `--writer mutex` makes the threads take one bench-side mutex around every call, so calls never overlap and
/// each op is its own transaction (group commit can't group anything): the "without grouping" reference,
/// measured with the same binary. The default `--writer group` calls the API directly.
enum W7Concurrent {
    static func run(_ args: Arguments) throws -> Bool {
        let threadCounts = try args.intList("threads", [4])
        let posts = try args.int("posts", 10_000)
        let users = try args.int("users", 1_000)
        let opCount = try args.int("ops", 20_000)
        let writer = args.string("writer", "group")
        let backend = try BackendChoice(args)
        guard writer == "group" || writer == "mutex" else { throw BenchError("--writer must be group or mutex") }
        try args.finish()

        let stream = ToggleStream(count: opCount, users: users, posts: posts)
        let commands = stream.commands
        let expected = stream.simulate()

        var allOK = true
        for threads in threadCounts {
            let ok = try measure(
                threads: threads, posts: posts, users: users, commands: commands, expected: expected,
                serialize: writer == "mutex", backend: backend)
            allOK = allOK && ok
        }
        return allOK
    }

    /// One run at `threads` threads on a fresh database; prints its JSON line.
    private static func measure(
        threads: Int, posts: Int, users: Int, commands: [LikeCommand],
        expected: (likes: Int, unlikes: Int, likedByUser1: Set<String>), serialize: Bool, backend: BackendChoice
    ) throws -> Bool {
        let database = try backend.makeDatabase(file: "toggle.sqlite")
        defer { database.remove() }
        let service = try database.open()
        defer { service.close() }

        let start = monotonicNanos()
        try service.seed(SeedPlan(posts: posts, users: users, likes: 0))
        let seedSeconds = seconds(since: start)

        let switchesBefore = contextSwitches()
        let cpuBefore = processCPUNanos()
        let outcome = ToggleThreads(service: service, commands: commands, threads: threads, serialize: serialize).run()
        let cpuSeconds = Double(processCPUNanos() - cpuBefore) / 1e9
        let switches = contextSwitches() - switchesBefore

        let totals = try ToggleTotals(service)
        let ok =
            outcome.failures.isEmpty && totals.likes == expected.likes
            && totals.likeCountTotal == Int64(expected.likes) && outcome.unlikes == expected.unlikes
            && totals.likedByUser1 == expected.likedByUser1
        if let failure = outcome.failures.first { note("w7: \(outcome.failures.count) calls failed, first: \(failure)") }

        var line = JSONLine()
        line.add("workload", "w7")
        line.add("impl", "feedsync")
        backend.addKeys(to: &line)
        line.add("writer", serialize ? "mutex" : "group")
        line.add("threads", threads)
        line.add("clients", threads)
        line.add("posts", posts)
        line.add("users", users)
        line.add("ops", commands.count)
        line.add("batch", 1)
        line.add("seed_s", seedSeconds, digits: 3)
        line.add("seconds", outcome.seconds, digits: 3)
        line.add("ops_per_s", Double(commands.count) / max(outcome.seconds, 1e-9), digits: 0)
        line.add("like_count_total", totals.likeCountTotal)
        line.add("likes", totals.likes)
        line.add("unlikes", outcome.unlikes)
        line.add("user1_likes", totals.likedByUser1.count)
        line.add("cpu_s", cpuSeconds, digits: 3)
        line.add("context_switches", switches)
        line.finish(ok: ok)
        return ok
    }

    /// Voluntary plus involuntary context switches of this process (all threads) so far.
    private static func contextSwitches() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_nvcsw + usage.ru_nivcsw
    }
}

/// The T threads of one W7 run (and of W1 with `--clients`), their start barrier and what they report.
final class ToggleThreads: Sendable {
    /// What the threads report, behind the mutex; read by the driver after the finish line.
    private struct Tally {
        var waiting: Int
        var running: Int
        var firstStart: UInt64 = .max
        var lastFinish: UInt64 = 0
        var unlikes = 0
        var failures: [String] = []
    }

    private let service: FeedService
    private let commands: [LikeCommand]
    private let threads: Int
    /// `--writer mutex`: one lock around every call, so no two calls overlap.
    private let serialize: Bool
    private let serializer = Mutex(())
    private let tally: Mutex<Tally>
    /// Start barrier and finish line: signalled when `waiting` (then `running`) reaches 0.
    private let condition = NSCondition()

    init(service: FeedService, commands: [LikeCommand], threads: Int, serialize: Bool) {
        self.service = service
        self.commands = commands
        self.threads = max(1, threads)
        self.serialize = serialize
        tally = Mutex(Tally(waiting: max(1, threads), running: max(1, threads)))
    }

    /// Starts the threads, waits for all of them to finish, and returns the timed span and their totals.
    func run() -> (seconds: Double, unlikes: Int, failures: [String]) {
        for index in 0..<threads {
            let thread = Thread { [self] in work(index) }
            thread.name = "w7-\(index)"
            thread.start()
        }
        condition.lock()
        while tally.withLock({ $0.running }) > 0 { condition.wait() }
        condition.unlock()
        return tally.withLock { tally in
            (Double(tally.lastFinish &- tally.firstStart) / 1e9, tally.unlikes, tally.failures)
        }
    }

    /// Thread `index`: waits at the barrier, then makes ops index, index + T, … through `toggle`.
    private func work(_ index: Int) {
        condition.lock()
        let left = tally.withLock { tally in
            tally.waiting -= 1
            return tally.waiting
        }
        if left == 0 {
            condition.broadcast()
        } else {
            while tally.withLock({ $0.waiting }) > 0 { condition.wait() }
        }
        condition.unlock()

        let started = monotonicNanos()
        var unlikes = 0
        var failures: [String] = []
        for i in stride(from: index, to: commands.count, by: threads) {
            let command = commands[i]
            do {
                let result: LikeResult
                if serialize {
                    result = try serializer.withLock { _ in
                        try service.toggle(userID: command.userID, postID: command.postID)
                    }
                } else {
                    result = try service.toggle(userID: command.userID, postID: command.postID)
                }
                if !result.liked { unlikes += 1 }
            } catch {
                failures.append("op \(i): \(error)")
            }
        }
        let finished = monotonicNanos()

        condition.lock()
        tally.withLock { tally in
            tally.firstStart = min(tally.firstStart, started)
            tally.lastFinish = max(tally.lastFinish, finished)
            tally.unlikes += unlikes
            tally.failures += failures
            tally.running -= 1
        }
        condition.broadcast()
        condition.unlock()
    }
}
