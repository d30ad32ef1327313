import FeedSync
import Foundation
import Synchronization

/// W4: W1 with one op per transaction, plus an observer of user 1's liked posts subscribed to
/// `service.bridge.changes`, applying each committed change to its set (no re-read: the events carry the change).
enum W4Observed {
    /// User 1's liked-post set, kept in sync by the bridge's change events.
    final class LikedSet: Sendable {
        /// The mutable part, behind the mutex.
        private struct State {
            var ids: Set<String> = []
            var notifications = 0
        }
        private let state = Mutex(State())
        private let userID: String

        init(userID: String, initial: Set<String>) {
            self.userID = userID
            state.withLock { $0.ids = initial }
        }

        /// Applies one committed change: every change counts as a notification; user 1's likes update the set.
        func apply(_ event: EventRecord) {
            state.withLock { state in
                state.notifications += 1
                guard let postID = event.postID else { return }
                switch event.kind {
                case .liked where event.userID == userID: state.ids.insert(postID)
                case .unliked where event.userID == userID, .postDeleted: state.ids.remove(postID)
                case .liked, .unliked, .postCreated, .userCreated, .likeCountChanged, .userDeleted: break
                }
            }
        }

        var snapshot: (ids: Set<String>, notifications: Int) { state.withLock { ($0.ids, $0.notifications) } }
    }

    static func run(_ args: Arguments) throws -> Bool {
        let posts = try args.int("posts", 10_000)
        let users = try args.int("users", 1_000)
        let opCount = try args.int("ops", 20_000)
        let backend = try BackendChoice(args)
        try args.finish()

        let database = try backend.makeDatabase(file: "observed.sqlite")
        defer { database.remove() }
        let bounds = try RunBounds(database)
        let service = try database.open()
        defer { service.close() }

        let stream = ToggleStream(count: opCount, users: users, posts: posts)
        let commands = stream.commands
        let expected = stream.simulate()

        var start = monotonicNanos()
        try service.seed(SeedPlan(posts: posts, users: users, likes: 0))
        let seedSeconds = seconds(since: start)

        // The seed's events reach the bridge first; then load the set and follow the bridge (sinks run on its
        // the sink's own queue, after each toggle returned).
        service.waitForDelivery(through: try service.status().lastSeq, timeout: .seconds(600))
        let observed = LikedSet(userID: "user1", initial: try service.likedPostIDs(userID: "user1"))
        let subscription = service.bridge.changes.sink { observed.apply($0) }

        var unlikes = 0
        var lastSeq: Int64 = 0
        try bounds.start()
        start = monotonicNanos()
        for command in commands {
            let result = try service.toggle(userID: command.userID, postID: command.postID)
            if !result.liked { unlikes += 1 }
            lastSeq = result.seq ?? lastSeq
        }
        // Timed until the observer has seen the last toggle.
        service.waitForDelivery(through: lastSeq, timeout: .seconds(600))
        let elapsed = seconds(since: start)
        try bounds.stop()
        subscription.cancel()

        let totals = try ToggleTotals(service)
        let (ids, notifications) = observed.snapshot
        let ok =
            totals.likes == expected.likes && totals.likeCountTotal == Int64(expected.likes)
            && unlikes == expected.unlikes && totals.likedByUser1 == expected.likedByUser1
            && ids == totals.likedByUser1 && notifications == opCount

        var line = JSONLine()
        line.add("workload", "w4")
        line.add("impl", "feedsync")
        backend.addKeys(to: &line)
        line.add("clients", 1)
        line.add("observer", "bridge")
        line.add("posts", posts)
        line.add("users", users)
        line.add("ops", opCount)
        line.add("batch", 1)
        line.add("seed_s", seedSeconds, digits: 3)
        line.add("seconds", elapsed, digits: 3)
        line.add("ops_per_s", Double(opCount) / max(elapsed, 1e-9), digits: 0)
        line.add("like_count_total", totals.likeCountTotal)
        line.add("likes", totals.likes)
        line.add("unlikes", unlikes)
        line.add("observed", ids.count)
        line.add("notifications", notifications)
        service.close()
        try bounds.addKeys(to: &line, ops: opCount)
        line.finish(ok: ok)
        return ok
    }
}
