import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Likes, unlikes, post deletions and user erasures racing in several processes that are killed with SIGKILL at
/// random moments and restarted, on both backends; and a like racing a delete of its post, many times.
///
/// The kill schedule and the agents' command streams come from one seed, printed by the test;
/// `FEEDSYNC_DELETE_STRESS_SEED` replays them (the processes' interleaving is the operating system's).
/// `FEEDSYNC_DELETE_STRESS_SECONDS` sets how long the processes race (8 s).
// Blocks: waits for agent child processes killed with SIGKILL, and for worker threads.
@Suite(.serialized, .ownThreads) struct DeletionStressTests {
    static let agents = 3
    static let users = 30
    static let posts = 120
    /// `user1`…`user8` may be erased; the others always survive.
    static let erasable = 8
    static let seconds = PostgresFaultTests.environmentInt("FEEDSYNC_DELETE_STRESS_SECONDS", 8)
    /// The race's users: `user2`… like, one after another, while the post is deleted.
    static let racers = 40

    @Test(arguments: TestBackend.allCases)
    func racingDeletionsErasuresAndLikesUnderSIGKILLLeaveNoTraceAndLoseNothing(on backend: TestBackend) throws {
        let bench = try benchExecutable()
        let dir = TemporaryDirectory("feedsync-delete-stress")
        guard let location = try backend.makeLocation(in: dir) else { return }
        let seed = UInt64(ProcessInfo.processInfo.environment["FEEDSYNC_DELETE_STRESS_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)
        print("DeletionStressTests[\(backend)]: seed \(seed) (FEEDSYNC_DELETE_STRESS_SEED=\(seed) replays it)")
        let service = try FeedService(location: location)
        defer { service.close() }
        // Through commands, not a bulk load, so that the log is complete and `check` replays it.
        for u in 1...Self.users { try service.createUser(id: "user\(u)") }
        for p in 1...Self.posts { try service.createPost(id: "post\(p)", authorID: "user\(1 + p % Self.users)", body: "post \(p)") }

        // A follower that runs throughout: the service's change stream from seq 0, applied as it arrives.
        let follower = try FeedService(location: location)
        defer { follower.close() }
        let live = LockedValue(LogReplay())
        let delivered = LockedLog<Int64>()
        let streamError = LockedLog<String>()
        // On threads of its own, so that tests blocking the cooperative pool cannot starve the follower.
        let stream = Task.detached(executorPreference: ThreadPerJobExecutor.shared) {
            do {
                for try await batch in follower.changes(after: 0) {
                    live.withLock { replay in for event in batch { replay.apply(event) } }
                    delivered.append(batch[batch.count - 1].seq)
                }
            } catch {
                streamError.append("\(error)")
                delivered.append(-1)
            }
        }
        defer { stream.cancel() }
        let warmUp = try service.like(userID: "user\(Self.users)", postID: "post1")
        let warmUpSeq = try #require(warmUp.seq)
        #expect(
            delivered.wait(seconds: 30) { ($0.last ?? 0) >= warmUpSeq },
            "the change stream delivers the set-up's events (through \(delivered.values.last ?? 0); \(streamError.values))")
        let ownSessions = try PostgresFaultTests.sessions(service, on: backend)

        let lines = LockedLog<String>()
        let kills = LockedLog<Int>()
        let errors = LockedLog<String>()
        let deadline = ContinuousClock.now + .seconds(Self.seconds)
        let started = ContinuousClock.now
        let watchdog = Watchdog(stallTimeout: .seconds(20), limit: .seconds(Double(Self.seconds) + 90))
        for slot in 0..<Self.agents {
            watchdog.spawn("agent-delete-\(slot + 1)") { worker in
                var random = FaultRandom(seed: seed &* 31 &+ UInt64(slot))
                var incarnation = 0
                while ContinuousClock.now < deadline {
                    incarnation += 1
                    let target = 1 + random.next(150)
                    worker.step("incarnation \(incarnation): starting agent-delete")
                    let arguments = [
                        "agent-delete", "--db", location, "--seed", String(seed &* 1000 &+ UInt64(100 * slot + incarnation)),
                        "--users", String(Self.users), "--posts", String(Self.posts), "--erasable", "1-\(Self.erasable)",
                        "--delete-permille", "8", "--erase-permille", "1", "--busy-timeout", "15",
                    ]
                    guard let child = try? Child(bench, arguments) else {
                        errors.append("slot \(slot + 1): could not start agent-delete")
                        return
                    }
                    worker.step("incarnation \(incarnation): waiting for \(target) lines")
                    let reached = child.lines.wait(seconds: 20) { $0.count >= target }
                    worker.step("incarnation \(incarnation): SIGKILL after \(child.lines.values.count) lines")
                    child.kill()
                    _ = child.wait(seconds: 10)
                    for line in child.lines.values { lines.append(line) }
                    kills.append(slot)
                    if !reached {
                        errors.append("slot \(slot + 1) incarnation \(incarnation): \(child.lines.values.count) of \(target) lines in 20 s")
                    }
                }
            }
        }
        if case .stalled(let report) = watchdog.waitForWorkers() {
            Watchdog.abandon([service, follower, dir])
            Issue.record(Comment(rawValue: report))
            return
        }
        #expect(errors.values == [])
        #expect(lines.values.filter { $0.hasPrefix("error") } == [], "every command succeeded or was refused as it must be")
        // A killed client's PostgreSQL session may still commit the statement it was sent; read once they ended. A
        // session killed while it waits for a lock notices only when its statement ends: behind other killed clients'
        // lock waits (each up to the agents' 15 s busy timeout), that can take longer than 30 s on a loaded machine.
        let lingering = PostgresFaultTests.sessionsEnded(service, on: backend, except: ownSessions, within: 90)
        #expect(lingering.ended, "the killed clients' \(lingering.lingering) server sessions ended within 90 s")

        let log = try service.events(after: 0)
        let finalSeq = try #require(log.last?.seq)
        #expect(
            delivered.wait(seconds: 60) { ($0.last ?? 0) >= finalSeq },
            "the change stream reaches seq \(finalSeq) (through \(delivered.values.last ?? 0); \(streamError.values))")
        let outcome = try DeletionStressOutcome(service: service, log: log, lines: lines.values)
        #expect(try service.check().map(\.description) == [])
        #expect(outcome.problems(live: live.withLock { $0 }) == [])
        print(
            "DeletionStressTests[\(backend)]: seed \(seed); \(kills.values.count) SIGKILLs of \(Self.agents) agents in "
                + "\(Watchdog.format(ContinuousClock.now - started)); \(outcome.summary); \(log.count) events")
    }

    /// A thread likes a fresh post as one user after another while another thread, through a second connection,
    /// deletes it, 40 times: each like commits before the delete (its event precedes the `postDeleted` one and its
    /// count is one more than the like before) or fails `postNotFound`, never after it; the post's likes go with it.
    @Test(arguments: TestBackend.allCases)
    func aLikeRacingADeleteOfItsPostCommitsBeforeItOrFailsPostNotFound(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let likers = try FeedService(location: location)
        defer { likers.close() }
        let deleter = try FeedService(location: location)
        defer { deleter.close() }
        for u in 1...Self.racers { try likers.createUser(id: "user\(u)") }
        let rounds = 40
        for round in 1...rounds { try likers.createPost(id: "race\(round)", authorID: "user1", body: "round \(round)") }
        let seed = UInt64(ProcessInfo.processInfo.environment["FEEDSYNC_DELETE_STRESS_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)
        print("DeletionStressTests race[\(backend)]: seed \(seed)")

        let likes = LockedLog<(round: Int, user: Int, seq: Int64, count: Int)>()
        let refusals = LockedLog<(round: Int, user: Int)>()
        let deletions = LockedLog<(round: Int, seq: Int64)>()
        let problems = LockedLog<String>()
        let likerGo = DispatchSemaphore(value: 0)
        let deleterGo = DispatchSemaphore(value: 0)
        let watchdog = Watchdog(stallTimeout: .seconds(20), limit: .seconds(120))
        watchdog.spawn("liker") { worker in
            for round in 1...rounds {
                worker.step("round \(round): waiting for the start")
                deleterGo.signal()
                guard likerGo.wait(timeout: .now() + 20) == .success else {
                    problems.append("round \(round): no start")
                    return
                }
                for user in 2...Self.racers {
                    worker.step("round \(round): user\(user) likes")
                    do {
                        let result = try likers.like(userID: "user\(user)", postID: "race\(round)")
                        likes.append((round, user, result.seq ?? 0, result.likeCount))
                    } catch {
                        if (error as? FeedError) == .postNotFound("race\(round)") {
                            refusals.append((round, user))
                        } else {
                            problems.append("round \(round) user\(user): \(error)")
                        }
                    }
                }
            }
        }
        watchdog.spawn("deleter") { worker in
            var random = FaultRandom(seed: seed)
            for round in 1...rounds {
                worker.step("round \(round): waiting for the liker")
                guard deleterGo.wait(timeout: .now() + 20) == .success else {
                    problems.append("round \(round): no liker")
                    return
                }
                likerGo.signal()
                // The fault injection: the delete lands somewhere among the round's likes.
                usleep(UInt32(random.next(3000)))
                worker.step("round \(round): deleting")
                do {
                    let deletion = try deleter.deletePost(postID: "race\(round)", by: nil)
                    deletions.append((round, deletion.seq ?? 0))
                } catch {
                    problems.append("round \(round) delete: \(error)")
                }
            }
        }
        if case .stalled(let report) = watchdog.waitForWorkers() {
            Watchdog.abandon([likers, deleter, dir])
            Issue.record(Comment(rawValue: report))
            return
        }
        #expect(problems.values == [])
        let log = try likers.events(after: 0)
        let deletedAt = Dictionary(uniqueKeysWithValues: deletions.values.map { ($0.round, $0.seq) })
        #expect(deletedAt.count == rounds && deletedAt.values.allSatisfy { $0 > 0 })
        for round in 1...rounds {
            let post = "race\(round)"
            let committed = likes.values.filter { $0.round == round }
            let refused = refusals.values.filter { $0.round == round }
            #expect(committed.count + refused.count == Self.racers - 1)
            // Committed likes come first, each one more than the last; every refusal comes after them.
            #expect(committed.map(\.count) == Array(0..<committed.count).map { $0 + 1 }, "round \(round): counts \(committed.map(\.count))")
            #expect(committed.map(\.user) == Array(2..<(2 + committed.count)), "round \(round): a like committed after a refusal")
            #expect(
                committed.allSatisfy { $0.seq > 0 && $0.seq < deletedAt[round] ?? 0 }, "round \(round): a like committed after the delete")
            let events = log.filter { $0.postID == post }
            #expect(events.map(\.kind) == [.postCreated] + committed.map { _ in .liked } + [.postDeleted])
            #expect(throws: FeedError.postNotFound(post)) { try likers.post(id: post, viewerID: nil) }
        }
        #expect(try likers.firstColumn("SELECT post_key FROM likes").isEmpty)
        #expect(try likers.check().map(\.description) == [])
        let before = likes.values.count
        print(
            "DeletionStressTests race[\(backend)]: \(rounds) rounds, \(before) likes committed before the delete, \(refusals.values.count) refused"
        )
    }
}
