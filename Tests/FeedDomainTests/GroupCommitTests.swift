import FeedSync
import FeedCore
import FeedDependencies
@testable import FeedDomain
import FeedPostgresBackend
import FeedPublishers
import FeedSQLite
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// Callers of `perform`, each on a thread of its own, with what each got back.
private final class Calls: Sendable {
    private let service: FeedService
    private let results = LockedLog<(String, Result<[LikeResult], FeedError>)>()
    private let done = DispatchGroup()

    init(_ service: FeedService) { self.service = service }

    /// Starts `perform(commands)` on a new thread, named `name`.
    func start(_ name: String, _ commands: [LikeCommand]) {
        done.enter()
        Thread.detachNewThread { [self] in
            let result = Result { () throws(FeedError) in try service.perform(commands) }
            results.append((name, result))
            done.leave()
        }
    }

    /// Holds the writer connection while a caller named "leader" (user1 likes post1) takes its own unit and waits for
    /// it, runs `queueBehind` (which starts more callers; they queue behind the leader), then releases the writer.
    func queueBehindAWaitingLeader(_ queueBehind: () -> Void) throws {
        let taken = service.group.queue.taken
        try service.store.database.writeWithoutTransaction { _ in
            start("leader", [LikeCommand(.like, userID: "user1", postID: "post1")])
            // The leader took its own unit and now waits for the writer connection held here.
            #expect(eventually { service.group.queue.taken == taken + 1 })
            queueBehind()
        }
    }

    /// The calls that returned so far.
    var finished: [(String, Result<[LikeResult], FeedError>)] { results.values }

    /// Every call's outcome by name once all returned, or `nil` when they did not within `seconds`.
    func outcomes(within seconds: Int) -> [String: Result<[LikeResult], FeedError>]? {
        guard done.wait(timeout: .now() + .seconds(seconds)) == .success else { return nil }
        return Dictionary(uniqueKeysWithValues: results.values)
    }
}

/// Group commit: overlapping callers share a transaction, each caller's commands stay isolated, every
/// caller returns only after the commit that holds its commands, events keep commit order, and an acknowledged
/// command survives a SIGKILL.
// Blocks: caller threads queue behind a held writer; waits for them and for child processes killed with SIGKILL.
@Suite(.serialized, .ownThreads) struct GroupCommitTests {
    // SQLite only: holds SQLite's one writer connection so that units queue and top up the leader's transaction.
    @Test func unitsQueuedBehindTheLeaderShareOneTransactionAndFailAlone() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let seen = Recorder(service.bridge.changes.map(\.seq))
        let before = service.group.statistics
        let calls = Calls(service)
        try calls.queueBehindAWaitingLeader {
            calls.start("ok-1", [LikeCommand(.like, userID: "user2", postID: "post1")])
            calls.start("unknown-post", [LikeCommand(.like, userID: "user2", postID: "nope")])
            calls.start(
                "second-fails",
                [LikeCommand(.like, userID: "user3", postID: "post2"), LikeCommand(.like, userID: "nobody", postID: "post2")])
            calls.start("ok-2", [LikeCommand(.toggle, userID: "user3", postID: "post3")])
            #expect(eventually { service.group.queue.waiting == 4 })
            #expect(calls.finished.isEmpty, "no caller may return before its commit")
        }
        let outcome = try #require(calls.outcomes(within: 20))
        #expect((try? outcome["leader"]?.get())?.first?.changed == true)
        #expect((try? outcome["ok-1"]?.get())?.first?.likeCount == 2)
        #expect((try? outcome["ok-2"]?.get())?.first?.liked == true)
        if case .failure(let error) = outcome["unknown-post"] {
            #expect(error == .postNotFound("nope"))
        } else {
            Issue.record("unknown post succeeded")
        }
        if case .failure(let error) = outcome["second-fails"] {
            #expect(error == .userNotFound("nobody"))
        } else {
            Issue.record("bad unit succeeded")
        }
        // The failed unit's first command was rolled back with it — here without any savepoint: both failures are
        // unknown ids, found before the unit wrote anything.
        #expect(try service.post(id: "post2", viewerID: "user3").liked == false)
        #expect(service.group.isolatedReruns == 0)
        let after = service.group.statistics
        #expect(after.units - before.units == 5)
        // The leader, held at BEGIN while the four queued, applies its own unit and then takes them in (topping up).
        #expect(after.transactions - before.transactions == 1, "the four queued units share the leader's transaction")
        // Three changes, delivered once each, in seq order, with no gap.
        #expect(seen.wait { $0.count == 3 })
        let seqs = seen.values
        #expect(seqs == Array(seqs[0]...(seqs[0] + 2)))
        #expect(try service.check().isEmpty)
    }

    /// A unit that fails *after* writing (here a trigger of the test's own raises on a like of post3, after the
    /// unit's first command liked post2): the batch, run without savepoints, is rolled back and run again with a
    /// savepoint per unit, so that unit fails alone and its first command is undone; the others commit once.
    // SQLite only: holds SQLite's one writer connection so that units queue and top up the leader's transaction.
    @Test func aUnitFailingAfterItWroteIsUndoneAloneByASavepointRerun() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        try service.store.database.write { db in
            try db.execute(
                """
                CREATE TRIGGER test_boom BEFORE INSERT ON likes
                WHEN NEW.post_key = (SELECT post_key FROM posts WHERE id = 'post3')
                BEGIN SELECT RAISE(ABORT, 'boom'); END
                """)
        }
        let seen = Recorder(service.bridge.changes.map(\.seq))
        let before = service.group.statistics
        let calls = Calls(service)
        try calls.queueBehindAWaitingLeader {
            calls.start("ok-1", [LikeCommand(.like, userID: "user2", postID: "post1")])
            calls.start(
                "boom", [LikeCommand(.like, userID: "user3", postID: "post2"), LikeCommand(.like, userID: "user3", postID: "post3")])
            calls.start("ok-2", [LikeCommand(.toggle, userID: "user2", postID: "post2")])
            #expect(eventually { service.group.queue.waiting == 3 })
        }
        let outcome = try #require(calls.outcomes(within: 20))
        #expect((try? outcome["leader"]?.get())?.first?.changed == true)
        #expect((try? outcome["ok-1"]?.get())?.first?.likeCount == 2)
        #expect((try? outcome["ok-2"]?.get())?.first?.likeCount == 1)
        if case .failure(let error) = outcome["boom"] {
            #expect("\(error)".contains("boom"), "\(error)")
        } else {
            Issue.record("the failing unit succeeded")
        }
        #expect(service.group.isolatedReruns == 1)
        #expect(try service.post(id: "post2", viewerID: "user3").liked == false)
        #expect(try service.post(id: "post2", viewerID: "user2").post.likeCount == 1)
        let after = service.group.statistics
        #expect(after.units - before.units == 4)
        // One transaction, run twice: the leader topped up the three queued units, then reran all four isolated.
        #expect(after.transactions - before.transactions == 1)
        #expect(seen.wait { $0.count == 3 })
        let seqs = seen.values
        #expect(seqs == Array(seqs[0]...(seqs[0] + 2)))
        #expect(try service.check().isEmpty)
    }

    /// Many threads, each a stream of toggles, some on unknown posts: every good command commits once, every bad
    /// one fails alone, counts match the likes, and the log is delivered in order, each event once.
    @Test(arguments: TestBackend.allCases) func concurrentCallersKeepCountsLogAndDeliveryExact(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try checkConcurrentCallers(service)
    }

    /// 8 threads × 300 toggles, one in ten of an unknown post: counts, log and delivery stay exact.
    private func checkConcurrentCallers(_ service: FeedService) throws {
        let seen = Recorder(service.bridge.changes.map(\.seq))
        let threads = 8
        let perThread = 300
        let failures = LockedLog<FeedError>()
        let changes = LockedLog<Int64>()
        let done = DispatchGroup()
        for k in 0..<threads {
            done.enter()
            Thread.detachNewThread {
                for i in 0..<perThread {
                    let post = i % 10 == 7 ? "missing\(k)" : "post\(1 + (i + k) % 3)"
                    switch Result(catching: { () throws(FeedError) in try service.toggle(userID: "user\(1 + k % 3)", postID: post) }) {
                    case .success(let result): if let seq = result.seq { changes.append(seq) }
                    case .failure(let error): failures.append(error)
                    }
                }
                done.leave()
            }
        }
        let finished = waitWhileProgressing("concurrent toggles", progress: { changes.values.count + failures.values.count }) {
            done.wait(timeout: $0)
        }
        #expect(finished)
        #expect(failures.values.count == threads * perThread / 10)
        #expect(failures.values.allSatisfy { if case .postNotFound = $0 { true } else { false } })
        #expect(changes.values.count == threads * perThread * 9 / 10)
        #expect(Set(changes.values).count == changes.values.count, "each change has its own seq")
        #expect(try service.check().isEmpty)
        let logged = try service.events(after: 0).map(\.seq).filter { $0 > (changes.values.min() ?? 0) - 1 }
        #expect(seen.wait { $0.count >= logged.count })
        let delivered = seen.values.filter { logged.contains($0) }
        #expect(delivered == logged, "delivered in seq order, each once")
        let stats = service.group.statistics
        print("group commit: \(stats.units) units in \(stats.transactions) transactions")
    }

    /// An acknowledged command survives a SIGKILL of the process: three threads commit through group commit in a
    /// child process, which is killed mid-stream; every seq it acknowledged is in the log after reopening.
    @Test(arguments: TestBackend.allCases) func acknowledgedCommandsSurviveASigkill(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let acknowledged = try killChildWriter(at: location, afterAcks: (0..<5).map { 50 + $0 * 40 })
        #expect(acknowledged >= 250)
    }

    /// The same while the child checkpoints: each kill comes only after the database file grew during that child's run
    /// (a checkpoint — its thread's, or its writer's at 8,000 pages — copied pages into it; the log of the previous
    /// round was folded in when the test closed its service), so the child dies while it keeps checkpointing. Every
    /// acknowledged change is there after reopening, and the checks hold.
    // SQLite only: kills the child while it checkpoints its WAL into the database file.
    @Test func acknowledgedCommandsSurviveASigkillDuringCheckpoints() throws {
        let dir = TemporaryDirectory()
        let acknowledged = try killChildWriter(at: dir.file("feed.sqlite"), afterAcks: [1_500, 2_000, 2_500]) { path, sizeBefore in
            fileSize(path) > sizeBefore
        }
        #expect(acknowledged >= 6_000)
    }

    /// Runs the `agent-crash` child (three threads toggling through group commit) once per target, killing it with
    /// SIGKILL once it acknowledged that many commits and `alsoWaitFor` (given the location and the file's size when
    /// the round began; 0 for a URL) holds; then reopens the database at `path` (a file or a URL) and checks it:
    /// every acknowledged seq logged.
    ///
    /// - Returns: how many commits the children acknowledged in all.
    private func killChildWriter(
        at path: String, afterAcks targets: [Int], alsoWaitFor: @escaping (String, Int) -> Bool = { _, _ in true }
    ) throws -> Int {
        try makeService(at: path).close()
        let bench = try benchExecutable()
        var acknowledged: [Int64] = []
        for (round, target) in targets.enumerated() {
            let sizeBefore = fileSize(path)
            let child = try Child(bench, ["agent-crash", "--db", path, "--threads", "3", "--posts", "3"])
            #expect(
                child.lines.wait(seconds: 120, until: { $0.count >= target && alsoWaitFor(path, sizeBefore) }),
                "round \(round): \(child.lines.values.count) acknowledgements")
            child.kill()
            for line in child.lines.values {
                let parts = line.split(separator: " ")
                guard parts.count == 4, parts[0] == "ack", let seq = Int64(parts[1]) else { continue }
                acknowledged.append(seq)
            }
            let service = try FeedService(location: path)
            #expect(try service.check().isEmpty)
            let logged = Set(try service.events(after: 0).map(\.seq))
            #expect(acknowledged.allSatisfy { logged.contains($0) }, "round \(round): an acknowledged change is missing")
            service.close()
        }
        return acknowledged.count
    }
}
