import FeedSync
import Foundation

/// W8: replicas (always SQLite files) of a source on either backend, each figure beside its peer on the source in
/// the same run:
///
/// 1. catch-up: a replica synced once, then the source gains N like events (W6's build); `sync()` until the replica
///    reflects them, against a `DurableSubscriber` reading the same N events from the source;
/// 2. push: a replica that queued M toggles offline (over posts 1, 2, …), one `sync()` (the pushes and the pull of
///    their events), against the same M toggles made by another user directly with `perform` (1,000 a batch);
/// 3. snapshot: the source's log pruned through its head, the first replica's `sync()` gets a snapshot instead;
/// 4. latency: one replica toggles a post and syncs while another replica of the same user follows the source,
///    from the sync's start to the follower's bridge delivering the change, against a toggle on the source
///    handed out by `changes(after:)` of a second service on the same database; K rounds each;
/// 5. checks: after a last sync every replica shows exactly what the source shows its user, nothing pending.
///
/// The log's toggles are drawn over users 1…U; user U+1 pushes from a replica, user U+2 makes the direct peer's
/// likes, so both start with no likes and end with the same ones.
enum W8Replica {
    static func run(_ args: Arguments) throws -> Bool {
        let events = try args.int("events", 100_000)
        let pushes = try args.int("pushes", 10_000)
        let rounds = max(1, try args.int("rounds", 50))
        let posts = max(1, try args.int("posts", 10_000))
        let users = max(1, try args.int("users", 1_000))
        let buildBatch = max(1, try args.int("build-batch", 1_000))
        let backend = try BackendChoice(args)
        try args.finish()

        let database = try backend.makeDatabase(file: "source.sqlite")
        defer { database.remove() }
        let directory = try TempDirectory()
        defer { directory.remove() }
        let source = try database.open()
        defer { source.close() }
        try source.seed(SeedPlan(posts: posts, users: users + 2, likes: 0))
        let pusherID = "user\(users + 1)"
        let directID = "user\(users + 2)"
        var replicas: [Replica] = []
        defer { for replica in replicas { replica.close() } }
        func replica(_ name: String, of userID: String) throws -> (Replica, Double) {
            let made = try Replica(in: directory, name: name, source: database.location, userID: userID)
            replicas.append(made)
            return (made, try timedSync(made).seconds)
        }

        // 1. Catch-up, then the change feed over the same events.
        note("w8: catch-up of \(events) events")
        let (phone, initialSeconds) = try replica("phone", of: "user1")
        let firstSeq = try source.status().lastSeq + 1
        var start = monotonicNanos()
        try buildToggles(source, events: events, users: users, posts: posts, batch: buildBatch)
        let buildSeconds = seconds(since: start)
        let lastSeq = try source.status().lastSeq
        let catchUp = try timedSync(phone)
        let tally = W6CatchUp.Tally()
        let subscriber = DurableSubscriber(
            name: "w8-change-feed", service: source, batchSize: SyncProtocol.maximumPullSize,
            delivery: .atLeastOnce { tally.add($0.seq) })
        start = monotonicNanos()
        let fed = try subscriber.catchUp()
        let feedSeconds = seconds(since: start)
        let feedTally = tally.snapshot
        let catchUpOK =
            try catchUp.report.pulled == events && catchUp.report.lastSyncedSeq == lastSeq && lastSeq - firstSeq + 1 == Int64(events)
            && fed == events && feedTally.count == events && feedTally.ordered && subscriber.cursor() == lastSeq

        // 2. Push: M offline toggles in one sync, then the same toggles directly on the source.
        note("w8: push of \(pushes) mutations")
        let (tablet, _) = try replica("tablet", of: pusherID)
        try toggleSpread(tablet.service, userID: pusherID, count: pushes, posts: posts)
        let queued = try tablet.service.replicaStatus()?.pendingChanges ?? -1
        let push = try timedSync(tablet)
        start = monotonicNanos()
        try toggleSpread(source, userID: directID, count: pushes, posts: posts)
        let directSeconds = seconds(since: start)
        let pushOK =
            try queued == pushes && push.report.pushed == pushes && push.report.rejected == 0 && push.report.pendingChanges == 0
            && push.report.pulled == pushes && source.likedPostIDs(userID: pusherID) == source.likedPostIDs(userID: directID)

        // 3. Snapshot: the phone's cursor is behind the pruned log.
        note("w8: snapshot after pruning")
        let pruned = try source.pruneEvents(through: try source.status().lastSeq)
        let resync = try timedSync(phone)
        let snapshotOK = resync.report.resynced && resync.report.pulled == posts && resync.report.pendingChanges == 0

        // 4. Latency: phone → source → laptop (the same user's other device), then the source's own change feed.
        note("w8: latency, \(rounds) rounds each")
        let (laptop, _) = try replica("laptop", of: "user1")
        let replicaTimes = try blockOn { try await replicaLatency(from: phone, to: laptop, rounds: rounds, posts: posts) }
        let watcher = try database.open()
        defer { watcher.close() }
        let feedTimes = try blockOn {
            try await feedLatency(source: source, watcher: watcher, user: directID, rounds: rounds, posts: posts)
        }
        let latencyOK = replicaTimes.missed == 0 && feedTimes.missed == 0

        // 5. Every replica, synced once more, shows what the source shows its user.
        var agreeing = 0
        for replica in replicas {
            _ = try timedSync(replica)
            if try agrees(replica, with: source) { agreeing += 1 }
        }
        let ok = catchUpOK && pushOK && snapshotOK && latencyOK && agreeing == replicas.count
        if !ok {
            note("w8 checks: catch-up \(catchUpOK), push \(pushOK), snapshot \(snapshotOK), latency \(latencyOK), agreeing \(agreeing)")
        }

        let catchUpRate = Double(catchUp.report.pulled) / max(catchUp.seconds, 1e-9)
        let feedRate = Double(fed) / max(feedSeconds, 1e-9)
        let pushRate = Double(push.report.pushed) / max(push.seconds, 1e-9)
        let directRate = Double(pushes) / max(directSeconds, 1e-9)
        var line = JSONLine()
        line.add("workload", "w8")
        line.add("impl", "feedsync")
        backend.addKeys(to: &line)
        line.add("replica", "sqlite")
        line.add("events", events)
        line.add("pushes", pushes)
        line.add("rounds", rounds)
        line.add("users", users)
        line.add("posts", posts)
        line.add("build_s", buildSeconds, digits: 3)
        line.add("initial_snapshot_ms", initialSeconds * 1_000, digits: 1)
        line.add("catchup_events_per_s", catchUpRate, digits: 0)
        line.add("changefeed_events_per_s", feedRate, digits: 0)
        line.add("catchup_vs_changefeed", catchUpRate / feedRate, digits: 3)
        line.add("pruned", pruned)
        line.add("snapshot_posts", resync.report.pulled)
        line.add("snapshot_ms", resync.seconds * 1_000, digits: 1)
        line.add("push_mutations_per_s", pushRate, digits: 0)
        line.add("direct_likes_per_s", directRate, digits: 0)
        line.add("push_vs_direct", pushRate / directRate, digits: 3)
        line.add("replica_p50_us", replicaTimes.percentileMicros(50), digits: 1)
        line.add("replica_p99_us", replicaTimes.percentileMicros(99), digits: 1)
        line.add("changefeed_p50_us", feedTimes.percentileMicros(50), digits: 1)
        line.add("changefeed_p99_us", feedTimes.percentileMicros(99), digits: 1)
        line.add("missed", replicaTimes.missed + feedTimes.missed)
        line.add("last_seq", try source.status().lastSeq)
        line.finish(ok: ok)
        return ok
    }
}
