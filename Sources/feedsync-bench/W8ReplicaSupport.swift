import FeedSync
import Foundation
import Synchronization

/// W8's parts: a replica in the run's temporary directory, the checks, and the two latency measurements.
extension W8Replica {
    /// A replica database (always a SQLite file) of the source, with its sync through the in-process transport.
    struct Replica: Sendable {
        let service: FeedService
        let sync: ReplicaSync
        let transport: InProcessSyncTransport
        let userID: String

        /// Makes `directory/name.sqlite` a replica of `source` for `userID`; nothing is synced yet.
        init(in directory: TempDirectory, name: String, source: String, userID: String) throws {
            service = try FeedService(location: directory.file(name + ".sqlite"))
            try service.makeReplica(of: source, userID: userID, clientID: "w8-" + name)
            transport = InProcessSyncTransport(location: source, userID: userID)
            sync = try ReplicaSync(replica: service, transport: transport)
            self.userID = userID
        }

        func close() {
            transport.close()
            service.close()
        }
    }

    /// A sync timed from its call to its return.
    static func timedSync(_ replica: Replica) throws -> (report: ReplicaSync.Report, seconds: Double) {
        try blockOn {
            let start = monotonicNanos()
            let report = try await replica.sync.sync()
            return (report, seconds(since: start))
        }
    }

    /// `events` toggles in `perform` transactions of `batch`, over `users` × `posts` (W6's build, seed 3).
    static func buildToggles(_ service: FeedService, events: Int, users: Int, posts: Int, batch: Int) throws {
        var random = BenchRandom(seed: 3)
        var built = 0
        while built < events {
            let size = min(batch, events - built)
            let commands = (0..<size).map { _ in
                let user = 1 + random.next(users)
                return LikeCommand(.toggle, userID: "user\(user)", postID: "post\(1 + random.next(posts))")
            }
            _ = try service.perform(commands)
            built += size
        }
    }

    /// `count` toggles by `userID` over posts 1, 2, … (wrapping at `posts`), in `perform` transactions of 1,000.
    static func toggleSpread(_ service: FeedService, userID: String, count: Int, posts: Int) throws {
        var done = 0
        while done < count {
            let size = min(1_000, count - done)
            _ = try service.perform((done..<done + size).map { LikeCommand(.toggle, userID: userID, postID: "post\(1 + $0 % posts)") })
            done += size
        }
    }

    /// Whether the replica shows exactly what the source shows its user (every feed row's id, count and liked
    /// flag), with nothing pending or rejected and no invariant violated.
    static func agrees(_ replica: Replica, with source: FeedService) throws -> Bool {
        let mine = try allRows(replica.service, viewer: replica.userID)
        let theirs = try allRows(source, viewer: replica.userID)
        let status = try replica.service.replicaStatus()
        let same =
            mine.map(\.post.id) == theirs.map(\.post.id) && mine.map(\.post.likeCount) == theirs.map(\.post.likeCount)
            && mine.map(\.liked) == theirs.map(\.liked)
        if !same { note("replica of \(replica.userID) differs from the source (\(mine.count) rows against \(theirs.count))") }
        return try same && status?.pendingChanges == 0 && status?.rejectedChanges == 0 && replica.service.check().isEmpty
    }

    /// The whole feed as `viewer` sees it, newest first.
    private static func allRows(_ service: FeedService, viewer: String) throws -> [FeedRow] {
        var rows: [FeedRow] = []
        var cursor: FeedCursor?
        repeat {
            let page = try service.feedPage(viewerID: viewer, before: cursor, limit: FeedService.maximumPageSize)
            rows += page.rows
            cursor = page.nextCursor
        } while cursor != nil
        return rows
    }

    /// Latencies in nanoseconds, one per round, and the rounds whose change never arrived (within 10 s).
    struct Latencies: Sendable {
        var nanos: [UInt64] = []
        var missed = 0

        func percentileMicros(_ p: Double) -> Double { Double(percentile(nanos.sorted(), p)) / 1_000 }
    }

    /// When each awaited key (a post id, or a seq) arrived, stamped by the observer itself.
    final class Arrivals<Key: Hashable & Sendable>: Sendable {
        private let stamps = Mutex<[Key: UInt64]>([:])

        func record(_ key: Key) {
            let now = monotonicNanos()
            stamps.withLock { if $0[key] == nil { $0[key] = now } }
        }

        func forget(_ key: Key) { _ = stamps.withLock { $0.removeValue(forKey: key) } }

        /// The arrival of `key`, polling every 100 µs for at most 10 s.
        func wait(for key: Key) async -> UInt64? {
            let deadline = monotonicNanos() + 10_000_000_000
            while monotonicNanos() < deadline {
                if let stamp = stamps.withLock({ $0[key] }) { return stamp }
                try? await Task.sleep(for: .microseconds(100))
            }
            return nil
        }
    }

    /// Replica `a` likes (toggles) a post and syncs; replica `b` (the same user's other device) follows the source;
    /// each round is timed from the start of `a`'s sync to `b`'s bridge delivering the post's changed like. One
    /// round first, untimed, to start `b`'s follow.
    static func replicaLatency(from a: Replica, to b: Replica, rounds: Int, posts: Int) async throws -> Latencies {
        let arrivals = Arrivals<String>()
        let user = b.userID
        let subscription = b.service.bridge.changes.sink { event in
            guard event.userID == user, event.kind == .liked || event.kind == .unliked, let postID = event.postID else { return }
            arrivals.record(postID + (event.kind == .liked ? "+" : "-"))
        }
        defer { subscription.cancel() }
        let follower = Task { try await b.sync.follow() }
        var result = Latencies()
        for round in 0...rounds {
            let postID = "post\(1 + round % posts)"
            let liked = try await a.service.toggle(userID: a.userID, postID: postID).liked
            let key = postID + (liked ? "+" : "-")
            arrivals.forget(key)
            let start = monotonicNanos()
            _ = try await a.sync.sync()
            guard let arrived = await arrivals.wait(for: key) else {
                result.missed += 1
                continue
            }
            if round > 0 { result.nanos.append(arrived - start) }
        }
        follower.cancel()
        _ = await follower.result
        return result
    }

    /// The peer: a like committed on the source through `source`, timed to the moment a second service on the same
    /// database (`watcher`) hands it out of `changes(after:)`. One round first, untimed.
    static func feedLatency(source: FeedService, watcher: FeedService, user: String, rounds: Int, posts: Int) async throws -> Latencies {
        let arrivals = Arrivals<Int64>()
        let changes = watcher.changes(after: try await source.status().lastSeq)
        let reader = Task {
            for try await batch in changes {
                for event in batch { arrivals.record(event.seq) }
            }
        }
        var result = Latencies()
        for round in 0...rounds {
            let start = monotonicNanos()
            let outcome = try await source.toggle(userID: user, postID: "post\(1 + round % posts)")
            guard let seq = outcome.seq, let arrived = await arrivals.wait(for: seq) else {
                result.missed += 1
                continue
            }
            if round > 0 { result.nanos.append(arrived - start) }
        }
        reader.cancel()
        _ = await reader.result
        return result
    }
}

/// Runs `body` on a detached task and blocks this (non-pool) thread until it finished; returns its value or
/// rethrows its error.
func blockOn<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let done = DispatchSemaphore(value: 0)
    let box = ResultBox<Result<T, any Error>>()
    Task.detached {
        do {
            box.set(.success(try await body()))
        } catch {
            box.set(.failure(error))
        }
        done.signal()
    }
    done.wait()
    return try box.get().get()
}
