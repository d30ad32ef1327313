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
        let bounds = try RunBounds(database)
        let service = try database.open()
        defer { service.close() }

        let start = monotonicNanos()
        try service.seed(SeedPlan(posts: posts, users: users, likes: 0))
        let seedSeconds = seconds(since: start)

        try bounds.start()
        let switchesBefore = contextSwitches()
        let cpuBefore = processCPUNanos()
        let outcome = ToggleThreads(service: service, commands: commands, threads: threads, serialize: serialize).run()
        let cpuSeconds = Double(processCPUNanos() - cpuBefore) / 1e9
        let switches = contextSwitches() - switchesBefore
        try bounds.stop()

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
        service.close()
        try bounds.addKeys(to: &line, ops: commands.count)
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
    private let service: FeedService
    private let commands: [LikeCommand]
    private let threads: Int
    /// `--writer mutex`: one lock around every call, so no two calls overlap.
    private let serialize: Bool
    private let serializer = Mutex(())

    init(service: FeedService, commands: [LikeCommand], threads: Int, serialize: Bool) {
        self.service = service
        self.commands = commands
        self.threads = max(1, threads)
        self.serialize = serialize
    }

    /// Starts the threads behind ``BarrierThreads``' start barrier, waits for all of them to finish, and returns the
    /// timed span and their totals.
    func run() -> (seconds: Double, unlikes: Int, failures: [String]) {
        let outcome = BarrierThreads.run(threads: threads, name: "w7") { [self] index in work(index) }
        return (outcome.seconds, outcome.reports.reduce(0) { $0 + $1.unlikes }, outcome.reports.flatMap(\.failures))
    }

    /// Thread `index`: makes ops index, index + T, … through `toggle`.
    private func work(_ index: Int) -> OpReport {
        var report = OpReport()
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
                if !result.liked { report.unlikes += 1 }
            } catch {
                report.failures.append("op \(i): \(error)")
            }
        }
        return report
    }
}
