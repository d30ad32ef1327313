import FeedSync
import Foundation
import Synchronization

/// W1: toggles from the toggle stream through `FeedService.toggle` (`--batch 1`) or `perform` (N per transaction).
///
/// `--clients N` (N > 1, batch 1) makes the ops from N OS threads at once, as W7 does (thread k makes ops i with
/// i % N == k), each op one `toggle` call: W1 "at N concurrent clients", to put beside pgbench's `-c N`.
/// `--hot-post` sends every op to `post1` (the users still come from the toggle stream): one contended post row.
/// `--followers N` keeps N other services on the database following it with a ``ChangeFeed`` (standing for other
/// processes or machines with the change feed live) while the toggles run; each must receive every toggle's event.
/// `--db URL` runs it on a fresh PostgreSQL database (``BackendChoice``).
enum W1Toggle {
    static func run(_ args: Arguments) throws -> Bool {
        let posts = try args.int("posts", 10_000)
        let users = try args.int("users", 1_000)
        let opCount = try args.int("ops", 20_000)
        let batch = max(1, try args.int("batch", 1))
        let clients = max(1, try args.int("clients", 1))
        let hotPost = try args.flag("hot-post")
        let followerCount = max(0, try args.int("followers", 0))
        let backend = try BackendChoice(args)
        try args.finish()
        guard clients == 1 || batch == 1 else { throw BenchError("--clients N needs --batch 1") }

        let database = try backend.makeDatabase(file: "toggle.sqlite")
        defer { database.remove() }
        let bounds = try RunBounds(database)
        let service = try database.open()
        defer { service.close() }

        let stream = ToggleStream(count: opCount, users: users, posts: posts, hotPost: hotPost)
        let commands = stream.commands
        let expected = stream.simulate()

        var start = monotonicNanos()
        try service.seed(SeedPlan(posts: posts, users: users, likes: 0))
        let seedSeconds = seconds(since: start)

        let followers = try (0..<followerCount).map { _ in try FeedService(location: database.location) }
        let received = Mutex(Array(repeating: 0, count: followerCount))
        let subscriptions = followers.enumerated().map { index, follower in
            follower.bridge.changes.sink { _ in received.withLock { $0[index] += 1 } }
        }
        let feeds = followers.map { ChangeFeed(service: $0) }
        for feed in feeds { try feed.start() }
        defer {
            for feed in feeds { feed.stop() }
            subscriptions.forEach { $0.cancel() }
            for follower in followers { follower.close() }
        }

        var unlikes = 0
        var failures: [String] = []
        var elapsed = 0.0
        try bounds.start()
        start = monotonicNanos()
        if clients > 1 {
            let outcome = ToggleThreads(service: service, commands: commands, threads: clients, serialize: false).run()
            elapsed = outcome.seconds
            unlikes = outcome.unlikes
            failures = outcome.failures
            if let failure = failures.first { note("w1: \(failures.count) calls failed, first: \(failure)") }
        } else if batch == 1 {
            for command in commands {
                let result = try service.toggle(userID: command.userID, postID: command.postID)
                if !result.liked { unlikes += 1 }
            }
        } else {
            var index = 0
            while index < commands.count {
                let end = min(index + batch, commands.count)
                for result in try service.perform(Array(commands[index..<end])) where !result.liked { unlikes += 1 }
                index = end
            }
        }
        if clients == 1 { elapsed = seconds(since: start) }
        try bounds.stop()
        // Every toggle changes its like: one event each, which every follower must get (at most 10 s after the end).
        let deadline = monotonicNanos() + 10_000_000_000
        while received.withLock({ $0.contains { $0 < opCount } }), monotonicNanos() < deadline { usleep(10_000) }
        let followersBehind = received.withLock { $0.filter { $0 != opCount }.count }

        let totals = try ToggleTotals(service)
        let ok =
            failures.isEmpty && followersBehind == 0 && totals.likes == expected.likes && totals.likeCountTotal == Int64(expected.likes)
            && unlikes == expected.unlikes && totals.likedByUser1 == expected.likedByUser1

        var line = JSONLine()
        line.add("workload", "w1")
        line.add("impl", "feedsync")
        backend.addKeys(to: &line)
        line.add("clients", clients)
        if hotPost { line.add("hot_post", true) }
        if followerCount > 0 { line.add("followers", followerCount) }
        line.add("posts", posts)
        line.add("users", users)
        line.add("ops", opCount)
        line.add("batch", batch)
        line.add("seed_s", seedSeconds, digits: 3)
        line.add("seconds", elapsed, digits: 3)
        line.add("ops_per_s", Double(opCount) / max(elapsed, 1e-9), digits: 0)
        line.add("like_count_total", totals.likeCountTotal)
        line.add("likes", totals.likes)
        line.add("unlikes", unlikes)
        line.add("user1_likes", totals.likedByUser1.count)
        service.close()
        try bounds.addKeys(to: &line, ops: opCount)
        line.finish(ok: ok)
        return ok
    }
}
