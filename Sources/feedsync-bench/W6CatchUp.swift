import FeedSync
import Foundation
import Synchronization

/// W6: builds a log of N like events (toggles from the toggle stream, `--build-batch` per `perform` transaction),
/// then a `DurableSubscriber` starting at cursor 0 catches up with `catchUp()`, once per delivery kind.
///
/// The toggles are drawn over `--users 10` × `--posts 100` by default so that building 1M events stays fast (the
/// likes table stays small; the log is what is measured).
enum W6CatchUp {
    /// What a handler saw: how many events, the last seq, and whether seqs were consecutive.
    final class Tally: Sendable {
        /// The mutable part, behind the mutex.
        private struct State {
            var count = 0
            var last: Int64 = 0
            var ordered = true
        }
        private let state = Mutex(State())

        func add(_ seq: Int64) {
            state.withLock { state in
                if seq != state.last + 1 { state.ordered = false }
                state.last = seq
                state.count += 1
            }
        }

        var snapshot: (count: Int, last: Int64, ordered: Bool) { state.withLock { ($0.count, $0.last, $0.ordered) } }
    }

    static func run(_ args: Arguments) throws -> Bool {
        let events = try args.int("events", 1_000_000)
        let buildBatch = max(1, try args.int("build-batch", 1_000))
        let batchSize = max(1, try args.int("batch", 1_000))
        let posts = try args.int("posts", 100)
        let users = try args.int("users", 10)
        let backend = try BackendChoice(args)
        try args.finish()

        let database = try backend.makeDatabase(file: "log.sqlite")
        defer { database.remove() }
        let service = try database.open()
        defer { service.close() }
        try service.seed(SeedPlan(posts: posts, users: users, likes: 0))

        // Every toggle changes something, so N toggles append exactly N events.
        var start = monotonicNanos()
        var random = BenchRandom(seed: 3)
        var built = 0
        while built < events {
            let size = min(buildBatch, events - built)
            var commands: [LikeCommand] = []
            commands.reserveCapacity(size)
            for _ in 0..<size {
                let user = 1 + random.next(users)
                let post = 1 + random.next(posts)
                commands.append(LikeCommand(.toggle, userID: "user\(user)", postID: "post\(post)"))
            }
            _ = try service.perform(commands)
            built += size
        }
        let buildSeconds = seconds(since: start)
        let lastSeq = try service.status().lastSeq
        let firstSeq = try service.events(after: 0, limit: 1).first?.seq ?? 0

        // At least once: the handler outside the database.
        let outside = Tally()
        let atLeastOnce = DurableSubscriber(
            name: "w6-at-least-once", service: service, batchSize: batchSize,
            delivery: .atLeastOnce { outside.add($0.seq) })
        start = monotonicNanos()
        let appliedOutside = try atLeastOnce.catchUp()
        let outsideSeconds = seconds(since: start)
        let outsideCursor = try atLeastOnce.cursor()

        // Transactional: applied inside the transaction that advances the cursor (the handler only counts).
        let inside = Tally()
        let transactional = DurableSubscriber(
            name: "w6-transactional", service: service, batchSize: batchSize,
            delivery: .transactional { event, _ in inside.add(event.seq) })
        start = monotonicNanos()
        let appliedInside = try transactional.catchUp()
        let insideSeconds = seconds(since: start)
        let insideCursor = try transactional.cursor()

        let expectedCount = lastSeq - firstSeq + 1
        let outsideTally = outside.snapshot
        let insideTally = inside.snapshot
        // Seqs start at firstSeq (the seed logs no events); both subscribers saw every event once, in order.
        let ok =
            firstSeq == 1 && lastSeq == Int64(events)
            && Int64(appliedOutside) == expectedCount && Int64(outsideTally.count) == expectedCount
            && outsideTally.ordered && outsideCursor == lastSeq
            && Int64(appliedInside) == expectedCount && Int64(insideTally.count) == expectedCount
            && insideTally.ordered && insideCursor == lastSeq

        var line = JSONLine()
        line.add("workload", "w6")
        line.add("impl", "feedsync")
        backend.addKeys(to: &line)
        line.add("clients", 1)
        line.add("events", events)
        line.add("users", users)
        line.add("posts", posts)
        line.add("build_batch", buildBatch)
        line.add("batch", batchSize)
        line.add("build_s", buildSeconds, digits: 3)
        line.add("events_per_s", Double(appliedOutside) / max(outsideSeconds, 1e-9), digits: 0)
        line.add("transactional_events_per_s", Double(appliedInside) / max(insideSeconds, 1e-9), digits: 0)
        line.add("last_seq", lastSeq)
        line.add("cursor", outsideCursor)
        line.add("transactional_cursor", insideCursor)
        line.finish(ok: ok)
        return ok
    }
}
