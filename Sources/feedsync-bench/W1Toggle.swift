import FeedSync
import Foundation

/// W1: toggles from the toggle stream through `FeedService.toggle` (`--batch 1`) or `perform` (N per transaction).
enum W1Toggle {
    static func run(_ args: Arguments) throws -> Bool {
        let posts = try args.int("posts", 10_000)
        let users = try args.int("users", 1_000)
        let opCount = try args.int("ops", 20_000)
        let batch = max(1, try args.int("batch", 1))
        try args.finish()

        let directory = try TempDirectory()
        defer { directory.remove() }
        let service = try FeedService(path: directory.file("toggle.sqlite"))

        let stream = ToggleStream(count: opCount, users: users, posts: posts)
        let commands = stream.commands
        let expected = stream.simulate()

        var start = monotonicNanos()
        try service.seed(SeedPlan(posts: posts, users: users, likes: 0))
        let seedSeconds = seconds(since: start)

        var unlikes = 0
        start = monotonicNanos()
        if batch == 1 {
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
        let elapsed = seconds(since: start)

        let totals = try ToggleTotals(service)
        let ok =
            totals.likes == expected.likes && totals.likeCountTotal == Int64(expected.likes)
            && unlikes == expected.unlikes && totals.likedByUser1 == expected.likedByUser1

        var line = JSONLine()
        line.add("workload", "w1")
        line.add("impl", "feedsync")
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
        line.finish(ok: ok)
        return ok
    }
}
