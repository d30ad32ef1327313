import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// With synchronous replication, a PostgreSQL primary killed with SIGKILL under load, and its standby promoted, loses
/// nothing acknowledged.
///
/// Each round starts a primary and a synchronous standby (`.ci/postgres-server.sh standby … sync`, on loopback),
/// seeds them with `feedsync seed`, and points every process at one multi-host URL
/// (`target_session_attrs=read-write`): four `agent-acks` writers on disjoint users, an `events --follow --json`
/// follower, a transactional durable subscriber (`agent-subscriber`), and a SQLite replica of one more user
/// (`replica init`, `sync --follow --json`) whose user likes and unlikes on it before the kill and after the
/// promotion. When a seeded writer has printed a seeded number of lines, the primary's postmaster gets SIGKILL and
/// the standby is promoted; the load goes on there, then stops. The new primary must hold every acknowledged change
/// under the seq its acknowledgement gave; the follower must have printed each seq once, in order, up to the new
/// head, each as the new primary has it; the subscriber must have applied each seq once up to a cursor at the head;
/// the replica must have synced past the head with nothing pending or rejected, its user's likes the same on both
/// sides; and `feedsync check` must pass on the new primary and on the replica.
///
/// `FEEDSYNC_FAILOVER_SEED` replays the kill moments (the processes' interleaving is the operating system's);
/// `FEEDSYNC_FAILOVER_ROUNDS` sets how many rounds, each on fresh servers, run (3).
// Blocks: runs `feedsync`, `feedsync-bench` agents and `.ci/postgres-server.sh` as child processes and waits for them.
@Suite(.serialized, .ownThreads) struct SynchronousFailoverTests {
    static let rounds = PostgresFaultTests.environmentInt("FEEDSYNC_FAILOVER_ROUNDS", 3)

    @Test func aSIGKILLedPrimaryLosesNoAcknowledgedLikeWhenItsSynchronousStandbyIsPromoted() throws {
        guard let parent = try PostgresFaultTests.restartableServerParent() else { return }
        let bench = try benchExecutable()
        let cli = URL(fileURLWithPath: bench).deletingLastPathComponent().appendingPathComponent("feedsync").path
        let seed = UInt64(ProcessInfo.processInfo.environment["FEEDSYNC_FAILOVER_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)
        print("SynchronousFailoverTests: seed \(seed) (FEEDSYNC_FAILOVER_SEED=\(seed) replays its \(Self.rounds) rounds)")
        for number in 1...Self.rounds {
            let round = FailoverRound(number: number, seed: seed &* 1000 &+ UInt64(number), parent: parent, bench: bench, cli: cli)
            defer { round.tearDown() }
            // The round's own waits are bounded at 60 s and say what they waited for; the watchdog catches the rest.
            let watchdog = Watchdog(stallTimeout: .seconds(75), limit: .seconds(180))
            watchdog.spawn("failover round \(number)") { worker in round.run(worker) }
            if case .stalled(let report) = watchdog.waitForWorkers() {
                Watchdog.abandon([round])
                Issue.record(Comment(rawValue: report))
                return
            }
            #expect(round.problems.values == [], "round \(number), seed \(round.seed)")
            if let figures = round.figures.values.last { print("SynchronousFailoverTests: \(figures)") }
        }
    }
}

/// One round: its servers, processes, problems found and measured figures. Its `run` goes on a watchdog's thread;
/// `tearDown` (on the test's) kills whatever the round started and removes its servers.
final class FailoverRound: Sendable {
    static let writers = 4
    static let usersPerWriter = 10
    static let posts = 50
    /// Commands per second per writer: the load leaves the two servers and the other processes room on a small machine.
    static let rate = 40
    /// Lines each writer prints on the new primary before the writers stop.
    static let linesAfterPromotion = 20

    let number: Int
    let seed: UInt64
    let bench: String
    let cli: String
    let primaryDir: String
    let standbyDir: String
    let home: TemporaryDirectory
    let children = LockedLog<Child>()
    let problems = LockedLog<String>()
    let figures = LockedLog<String>()

    init(number: Int, seed: UInt64, parent: String, bench: String, cli: String) {
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        (self.number, self.seed, self.bench, self.cli) = (number, seed, bench, cli)
        primaryDir = parent + "/primary-" + tag
        standbyDir = parent + "/standby-" + tag
        home = TemporaryDirectory("feedsync-sync-failover")
    }

    var environment: [String: String] { ["PATH": "/usr/bin:/bin", "HOME": home.path, "LANG": "C.UTF-8"] }

    func tearDown() {
        for child in children.values where child.process.isRunning { child.kill() }
        for dir in [standbyDir, primaryDir] { _ = try? PostgresFaultTests.script(["stop", dir], timeout: 60) }
    }

    private func problem(_ text: String) { problems.append(text) }

    private func start(_ executable: String, _ arguments: [String], capturingErrors: Bool = false) throws -> Child {
        let child = try Child(executable, arguments, environment: environment, capturingErrors: capturingErrors)
        children.append(child)
        return child
    }

    private func feedsync(_ arguments: String...) throws -> (status: Int32, stdout: String, stderr: String) {
        try SpawnedProcess.run(cli, arguments, environment: environment)
    }

    func run(_ worker: Watchdog.Worker) {
        do {
            try runThrowing(worker)
        } catch {
            problem("\(worker.name): \(error)")
        }
    }

    private func runThrowing(_ worker: Watchdog.Worker) throws {
        worker.step("starting the primary")
        let primary = try PostgresFaultTests.script(["start", primaryDir], timeout: 60)
        worker.step("seeding")
        // The writers' users, then the replica's.
        let users = Self.writers * Self.usersPerWriter + 1
        let replicaUser = "user\(users)"
        let seeded = try feedsync("--db", primary, "seed", "--posts", "\(Self.posts)", "--users", "\(users)", "--likes", "0")
        guard seeded.status == 0 else { return problem("seed failed: \(seeded.stderr)") }
        worker.step("starting the synchronous standby")
        let standbyPort = try PostgresFaultTests.script(["standby", standbyDir, primaryDir, "sync"], timeout: 120)
        guard let components = URLComponents(string: primary), let primaryPort = components.port, let password = components.password
        else { return problem("the server's URL has no port or password") }
        let standby = primary.replacingOccurrences(of: ":\(primaryPort)/", with: ":\(standbyPort)/")
        let both =
            "postgresql://\(components.user ?? ""):\(password)@127.0.0.1:\(primaryPort),127.0.0.1:\(standbyPort)"
            + "\(components.path)?target_session_attrs=read-write&connect_timeout=2"

        worker.step("making a replica for \(replicaUser)")
        let replica = home.path + "/replica.sqlite"
        let made = try feedsync("--db", replica, "replica", "init", "--from", both, "--user", replicaUser)
        guard made.status == 0 else { return problem("replica init failed: \(made.stderr)") }

        worker.step("starting the follower, the subscriber, the replica's sync and \(Self.writers) writers")
        let follower = try start(cli, ["--db", both, "events", "--follow", "--json"], capturingErrors: true)
        let replicaSync = try start(cli, ["--db", replica, "sync", "--follow", "--json"], capturingErrors: true)
        let subscriber = try start(bench, ["agent-subscriber", "--db", both, "--name", "failover"])
        var writers: [Child] = []
        for slot in 0..<Self.writers {
            let first = 1 + slot * Self.usersPerWriter
            writers.append(
                try start(
                    bench,
                    [
                        "agent-acks", "--db", both, "--seed", String(seed &* 10 &+ UInt64(slot)), "--users",
                        "\(first)-\(first + Self.usersPerWriter - 1)", "--posts", "\(Self.posts)", "--rate", "\(Self.rate)",
                    ]))
        }

        worker.step("the replica's likes before the kill")
        try replicaCommands(replica, [("like", "post1"), ("like", "post2"), ("like", "post3")])
        // The kill moment: when a seeded writer has printed a seeded number of lines.
        var random = FaultRandom(seed: seed)
        let victim = random.next(Self.writers)
        let target = 20 + random.next(80)
        worker.step("waiting for writer \(victim + 1)'s line \(target)")
        guard writers[victim].lines.wait(seconds: 30, until: { $0.count >= target }) else {
            return problem("writer \(victim + 1) printed \(writers[victim].lines.values.count) of \(target) lines in 30 s")
        }
        let acksBeforeKill = writers.reduce(0) { $0 + $1.lines.values.count { Ack($0, slot: 0)?.seq ?? 0 > 0 } }
        let clock = ContinuousClock()
        worker.step("SIGKILL of the primary's postmaster")
        try PostgresFaultTests.script(["kill", primaryDir], timeout: 30)
        let killed = clock.now
        worker.step("promoting the standby")
        try PostgresFaultTests.script(["promote", standbyDir], timeout: 90)
        let promotion = clock.now - killed
        let baseline = writers.map { $0.lines.values.count }

        worker.step("waiting for a writer's first acknowledged change on the new primary")
        guard let firstAck = Self.firstLine(of: writers, after: baseline, seconds: 60, where: { Ack($0, slot: 0)?.seq ?? 0 > 0 }),
            let firstSeq = Ack(firstAck, slot: 0)?.seq
        else { return problem("no writer's change was acknowledged within 60 s of the promotion") }
        let writerBack = clock.now - killed
        worker.step("waiting for the follower to print seq \(firstSeq)")
        guard follower.lines.wait(seconds: 60, until: { (Self.printed($0).last?.seq ?? 0) >= firstSeq }) else {
            return problem("the follower did not print seq \(firstSeq) within 60 s (\(follower.errorLines.values.suffix(3)))")
        }
        let followerBack = clock.now - killed
        worker.step("the replica's likes after the promotion")
        try replicaCommands(replica, [("like", "post4"), ("unlike", "post1"), ("like", "post5")])
        worker.step("load on the new primary")
        for (slot, writer) in writers.enumerated() {
            guard writer.lines.wait(seconds: 30, until: { $0.count >= baseline[slot] + Self.linesAfterPromotion }) else {
                return problem("writer \(slot + 1) printed \(writer.lines.values.count - baseline[slot]) lines on the new primary in 30 s")
            }
        }
        worker.step("stopping the writers")
        for writer in writers {
            writer.kill()
            if !writer.wait(seconds: 10) { problem("a killed writer's output did not end within 10 s") }
        }

        let service = try FeedService(location: standby)
        defer { service.close() }
        let head = try service.events(after: 0).last?.seq ?? 0
        worker.step("waiting for the follower and the subscriber to reach seq \(head)")
        let followerReached = follower.lines.wait(seconds: 60) { (Self.printed($0).last?.seq ?? 0) >= head }
        if !followerReached { problem("the follower did not reach seq \(head) within 60 s") }
        let subscriberReached = subscriber.lines.wait(seconds: 60) { lines in
            lines.contains { $0.hasPrefix("applied ") && Int64($0.dropFirst(8)) ?? 0 >= head }
        }
        if !subscriberReached {
            problem("the subscriber did not apply seq \(head) within 60 s (its last lines: \(subscriber.lines.values.suffix(5)))")
        }
        // Stopped before the checks read: SIGKILL rolls back a batch in flight, and the output is complete.
        for child in [follower, subscriber] {
            child.kill()
            if !child.wait(seconds: 10) { problem("a killed process's output did not end within 10 s") }
        }

        worker.step("checking the new primary")
        let log = try service.events(after: 0)
        if log.map(\.seq) != Self.oneTo(log.count) {
            problem("the new primary's log is not seqs 1...\(log.count)")
        }
        let bySeq = Dictionary(log.map { ($0.seq, $0) }, uniquingKeysWith: { first, _ in first })
        let acks = writers.enumerated().flatMap { slot, writer in writer.lines.values.compactMap { Ack($0, slot: slot) } }
        checkAcknowledged(acks, against: bySeq)
        checkFollower(follower, head: head, against: bySeq, password: password)
        try checkSubscriber(service, head: head)
        try checkReplica(replica, replicaSync, user: replicaUser, head: head, on: service)
        let check = try feedsync("--db", standby, "check")
        if check.status != 0 { problem("feedsync check failed on the new primary: \(check.stdout)\(check.stderr)") }

        let changes = acks.count { $0.seq > 0 }
        // A command may fail while the primary is gone, as the server being unavailable; never as a data error.
        let errors = writers.flatMap { $0.lines.values.filter { $0.hasPrefix("error ") } }
        if errors.contains(where: { $0.hasPrefix("error data ") }) { problem("a writer's command failed as a data error: \(errors)") }
        let errorKinds = Dictionary(errors.map { ($0.dropFirst(6), 1) }, uniquingKeysWith: +).sorted { $0.key < $1.key }
            .map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        figures.append(
            "round \(number) (seed \(seed)): SIGKILL after \(acksBeforeKill) acknowledged changes; promotion \(Self.seconds(promotion)), "
                + "first acknowledged change on the new primary \(Self.seconds(writerBack)) after the kill, the follower printed it "
                + "after \(Self.seconds(followerBack)); \(changes) acknowledged changes (\(changes - acksBeforeKill) after the kill), "
                + "\(errors.count) failed commands during the switch (\(errorKinds)), "
                + "head \(head)")
    }

    /// Every acknowledged change is in the new primary's log under its seq, as acknowledged; every acknowledged post
    /// exists; no seq was acknowledged twice.
    private func checkAcknowledged(_ acks: [Ack], against bySeq: [Int64: EventRecord]) {
        var lost: [String] = []
        for ack in acks where ack.seq > 0 {
            let event = bySeq[ack.seq]
            if event?.kind.rawValue != ack.kind || event?.userID != ack.userID || event?.postID != ack.postID {
                let found = event.map { "\($0.kind) \($0.userID) \($0.postID ?? "-")" } ?? "missing"
                lost.append("writer \(ack.slot + 1): ack \(ack.seq) \(ack.kind) \(ack.userID) \(ack.postID) is \(found)")
            }
        }
        let created = Set(bySeq.values.filter { $0.kind == .postCreated }.compactMap(\.postID))
        for ack in acks where ack.kind == "post" && !created.contains(ack.postID) {
            lost.append("writer \(ack.slot + 1): post \(ack.postID) is missing")
        }
        if !lost.isEmpty { problem("\(lost.count) acknowledged changes lost on the new primary: \(lost.prefix(10))") }
        let seqs = acks.map(\.seq).filter { $0 > 0 }
        if Set(seqs).count != seqs.count { problem("a seq was acknowledged twice") }
    }

    /// The follower printed seqs 1… to the head, each once, in order, each as the new primary has it, and never the
    /// password.
    private func checkFollower(_ follower: Child, head: Int64, against bySeq: [Int64: EventRecord], password: String) {
        let printed = Self.printed(follower.lines.values)
        let seqs = printed.map(\.seq)
        if seqs != Self.oneTo(seqs.count) || (seqs.last ?? 0) < head {
            problem("the follower printed \(seqs.count) events, not seqs 1...\(head) each once in order: \(Self.firstBreak(seqs))")
        }
        let differing = printed.filter { line in
            let event = bySeq[line.seq]
            return event?.kind.rawValue != line.kind || event?.userID != line.userID || event?.postID != line.postID
        }
        if !differing.isEmpty {
            problem("the follower printed \(differing.count) events the new primary has otherwise: \(differing.prefix(5))")
        }
        if follower.errorLines.values.joined().contains(password) { problem("the follower's errors show the password") }
    }

    /// Runs the replica user's commands (each queued on the replica, for its sync to push).
    private func replicaCommands(_ replica: String, _ commands: [(String, String)]) throws {
        for (command, post) in commands {
            let result = try feedsync("--db", replica, command, post)
            if result.status != 0 { problem("\(command) \(post) on the replica failed: \(result.stderr)") }
        }
    }

    /// The replica's sync reached the head with nothing pending or rejected, its user's likes are the new primary's
    /// (post2…post5: what its commands left), and `check` passes on it.
    private func checkReplica(_ replica: String, _ sync: Child, user: String, head: Int64, on service: FeedService) throws {
        struct Synced: Decodable { let rejected: Int, pendingChanges: Int, lastSyncedSeq: Int64 }
        let synced = { (lines: [String]) in lines.compactMap { try? JSONDecoder().decode(Synced.self, from: Data($0.utf8)) } }
        if !sync.lines.wait(seconds: 60, until: { synced($0).contains { $0.pendingChanges == 0 && $0.lastSyncedSeq >= head } }) {
            problem("the replica's sync did not reach seq \(head) with nothing pending within 60 s: \(sync.lines.values.suffix(2))")
        }
        sync.kill()
        _ = sync.wait(seconds: 10)
        if synced(sync.lines.values).contains(where: { $0.rejected > 0 }) { problem("the source rejected a replica change") }
        let query = """
            SELECT p.id FROM likes l JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key
            WHERE u.id = '\(user)' ORDER BY p.id
            """
        let onPrimary = try service.firstColumn(query).compactMap(\.text)
        let local = try FeedService(location: replica)
        defer { local.close() }
        let onReplica = try local.firstColumn(query).compactMap(\.text)
        let expected = ["post2", "post3", "post4", "post5"]
        if onPrimary != expected || onReplica != expected {
            problem("\(user)'s likes: \(onPrimary) on the new primary, \(onReplica) on the replica, not \(expected)")
        }
        let check = try feedsync("--db", replica, "check")
        if check.status != 0 { problem("feedsync check failed on the replica: \(check.stdout)\(check.stderr)") }
    }

    /// The subscriber applied seqs 1… to its cursor, each once, and its cursor reached the head.
    private func checkSubscriber(_ service: FeedService, head: Int64) throws {
        let query = "SELECT seq FROM agent_applied WHERE subscriber = 'failover' ORDER BY seq"
        let applied = try service.firstColumn(query).compactMap(\.integer)
        let cursor =
            try service.firstColumn("SELECT last_seq FROM subscriber_cursors WHERE name = 'failover'").compactMap(\.integer).first ?? 0
        if applied != Self.oneTo(applied.count) || applied.last ?? 0 != cursor {
            problem("the subscriber's \(applied.count) applied seqs are not 1...\(cursor) each once: \(Self.firstBreak(applied))")
        }
        if cursor < head { problem("the subscriber's cursor \(cursor) is behind the head \(head)") }
    }

    /// One event the follower printed.
    struct Printed: Decodable, Sendable, CustomStringConvertible {
        let seq: Int64
        let kind: String
        let postID: String?
        let userID: String
        var description: String { "\(seq) \(kind) \(userID) \(postID ?? "-")" }
    }

    static func printed(_ lines: [String]) -> [Printed] {
        lines.compactMap { try? JSONDecoder().decode(Printed.self, from: Data($0.utf8)) }
    }

    /// 1, 2, … `count`.
    static func oneTo(_ count: Int) -> [Int64] { (0..<Int64(count)).map { $0 + 1 } }

    /// Where a list meant to be 1, 2, 3… first differs from it.
    static func firstBreak(_ seqs: [Int64]) -> String {
        guard let index = seqs.indices.first(where: { seqs[$0] != Int64($0) + 1 }) else { return "none" }
        return "position \(index) holds \(seqs[index]), around \(seqs[max(0, index - 2)..<min(seqs.count, index + 3)])"
    }

    /// The first line past `counts` that `accept` takes in any of `children`'s output, waiting at most `seconds`.
    static func firstLine(of children: [Child], after counts: [Int], seconds: Double, where accept: (String) -> Bool) -> String? {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            for (child, count) in zip(children, counts) {
                var found: String?
                _ = child.lines.wait(seconds: 0.005) { lines in
                    found = lines.dropFirst(count).first(where: accept)
                    return found != nil
                }
                if let found { return found }
            }
        }
        return nil
    }

    static func seconds(_ duration: Duration) -> String { Watchdog.format(duration) }
}
