import FeedSync
import FeedCore
import FeedDomain
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// Faults with real processes and a real server — concurrent client processes, clients killed
/// with SIGKILL mid-transaction, and a server restarted (`pg_ctl restart -m immediate`) under load. Every acknowledged
/// change must be in the tables and the log, nothing half-done may remain, and followers resume by themselves.
///
/// `FEEDSYNC_FAULT_COMMANDS` (default 5000) sets the commands per client process of the random-commands test;
/// `FEEDSYNC_FAULT_KILLS` (default 25) the number of SIGKILLs.
// Blocks: waits for child processes killed with SIGKILL and for a restarted PostgreSQL server.
@Suite(.serialized, .ownThreads) struct PostgresFaultTests {
    static let commandsPerClient = environmentInt("FEEDSYNC_FAULT_COMMANDS", 5000)
    static let kills = environmentInt("FEEDSYNC_FAULT_KILLS", 25)

    // MARK: - 1. Four client processes of random commands

    /// Four processes each run thousands of random commands (likes, unlikes, toggles, new posts, invalid ids that
    /// must fail with a typed error) on one database; afterwards the invariants hold, and replaying the log from
    /// seq 1 gives exactly the likes table.
    @Test(arguments: TestBackend.allCases)
    func fourClientProcessesOfRandomCommandsLeaveTheLogAndTheTablesInAgreement(on backend: TestBackend) throws {
        let bench = try benchExecutable()
        let dir = TemporaryDirectory("feedsync-faults")
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try FeedService(location: location)
        try service.seed(SeedPlan(posts: 50, users: 20, likes: 0))
        let count = Self.commandsPerClient
        let started = ContinuousClock.now

        // `--busy-timeout 15`: SQLite's write lock has no queue, and on a machine running every suite at once an
        // agent can be kept out past the library's 5 s (`Docs/Scaling.md`, item 6; a holder stalled in I/O).
        // This test is about invariants and replay; the busy policy has its own tests. 15 s stays under the stall
        // watchdog's 20 s, and a failing agent says how long its command waited.
        let children = try (1...4).map { k in
            try Child(
                bench,
                [
                    "agent-random", "--db", location, "--seed", String(k), "--count", String(count), "--users", "20", "--posts", "50",
                    "--busy-timeout", "15",
                ])
        }
        let watchdog = Watchdog(stallTimeout: .seconds(20), limit: .seconds(300))
        let exits = LockedLog<String>()
        for (i, child) in children.enumerated() {
            watchdog.spawn("agent-random-\(i + 1)") { worker in
                Self.follow(child, worker: worker, describe: { lines in "\(lines.last ?? "started"), \(count) commands in all" }) {
                    $0.last?.hasPrefix("done") == true
                }
                exits.append("\(i + 1):\(child.process.isRunning ? "running" : String(child.process.terminationStatus))")
            }
        }
        if case .stalled(let report) = watchdog.waitForWorkers() {
            for child in children { child.kill() }
            Watchdog.abandon([service, dir])
            Issue.record(Comment(rawValue: report))
            return
        }
        let busy = ContinuousClock.now - started
        #expect(exits.values.sorted() == ["1:0", "2:0", "3:0", "4:0"], "agent-random exit statuses (1 = a command behaved unexpectedly)")
        let totals = children.compactMap { Self.doneLine($0.lines.values.last) }
        #expect(totals.count == 4, "every agent printed its final line")

        let log = try service.events(after: 0)
        let likeEvents = log.filter { $0.kind == .liked || $0.kind == .unliked }.count
        let postEvents = log.filter { $0.kind == .postCreated }.count
        #expect(likeEvents == totals.map(\.changed).reduce(0, +), "one like or unlike event per command that changed something")
        #expect(postEvents == totals.map(\.posts).reduce(0, +), "one postCreated event per created post")
        #expect(totals.map(\.refused).reduce(0, +) > 0, "invalid commands were tried")
        #expect(log.map(\.seq) == (0..<log.count).map { Int64($0 + 1) }, "the log's seqs are 1…n without gaps")
        #expect(try service.check().map(\.description) == [])
        try expectReplayMatchesLikes(service, log)
        print(
            "PostgresFaultTests[\(backend)]: 4 processes × \(count) random commands in \(Watchdog.format(busy)); "
                + "\(log.count) events, \(totals.map(\.refused).reduce(0, +)) invalid commands refused")
    }

    // MARK: - 2. Clients killed mid-transaction

    /// Client processes are killed with SIGKILL at random moments while they run commands (two at a time, 25 kills
    /// in all). Every change a client acknowledged is in the tables and the log with its seq, kind, user and post;
    /// at most one unacknowledged change per kill (the command in flight) committed; nothing is half-done.
    @Test(arguments: TestBackend.allCases)
    func clientsKilledMidTransactionLoseNoAcknowledgedChangeAndLeaveNoPartialOne(on backend: TestBackend) throws {
        let bench = try benchExecutable()
        let dir = TemporaryDirectory("feedsync-faults")
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try FeedService(location: location)
        try service.seed(SeedPlan(posts: 50, users: 20, likes: 0))
        let started = ContinuousClock.now

        let slots = [(name: "slot-a", users: "1-10"), (name: "slot-b", users: "11-20")]
        let perSlot = [Self.kills / 2 + Self.kills % 2, Self.kills / 2]
        let lines = LockedLog<(slot: Int, line: String)>()
        let incarnations = LockedLog<Int>()
        let ownSessions = try Self.sessions(service, on: backend)
        let errors = LockedLog<String>()
        let watchdog = Watchdog(stallTimeout: .seconds(15), limit: .seconds(120))
        for (s, slot) in slots.enumerated() {
            watchdog.spawn(slot.name) { worker in
                var random = FaultRandom(seed: UInt64(31 + s))
                for kill in 1...max(perSlot[s], 1) where perSlot[s] > 0 {
                    let target = 1 + random.next(60)
                    worker.step("kill \(kill)/\(perSlot[s]): starting agent-acks")
                    guard
                        let child = try? Child(
                            bench,
                            [
                                "agent-acks", "--db", location, "--seed", String(100 * s + kill), "--users", slot.users, "--stop-on-error",
                                "1",
                            ])
                    else {
                        errors.append("\(slot.name): could not start agent-acks")
                        return
                    }
                    worker.step("kill \(kill)/\(perSlot[s]): waiting for \(target) acknowledged commands")
                    let reached = child.lines.wait(seconds: 20) { $0.count >= target || $0.contains { $0.hasPrefix("error") } }
                    worker.step("kill \(kill)/\(perSlot[s]): SIGKILL after \(child.lines.values.count) lines")
                    child.kill()
                    _ = child.wait(seconds: 10)
                    for line in child.lines.values { lines.append((s, line)) }
                    incarnations.append(s)
                    if !reached { errors.append("\(slot.name) kill \(kill): only \(child.lines.values.count) of \(target) lines in 20 s") }
                    if let error = child.lines.values.first(where: { $0.hasPrefix("error") }) {
                        errors.append("\(slot.name) kill \(kill): \(error)")
                    }
                }
            }
        }
        if case .stalled(let report) = watchdog.waitForWorkers() {
            Watchdog.abandon([service, dir])
            Issue.record(Comment(rawValue: report))
            return
        }
        #expect(errors.values == [])
        #expect(incarnations.values.count == Self.kills)
        // A killed client's server session still runs the statement it was sent, and may commit it, until it finds
        // the client gone; the log and the tables are read once every such session has ended.
        let lingering = Self.sessionsEnded(service, on: backend, except: ownSessions)
        #expect(lingering.ended, "the killed clients' \(lingering.lingering) server sessions ended within 30 s")

        let log = try service.events(after: 0)
        let acks = lines.values.compactMap { Ack($0.line, slot: $0.slot) }
        #expect(acks.contains { $0.seq > 0 }, "the clients acknowledged changes before they were killed")
        #expect(Self.ackProblems(acks, log: log, service: service) == [])
        // Each slot's users are its own: an event of theirs that no client acknowledged was the command in flight
        // at a kill, which committed before the process died. At most one per kill.
        for (s, slot) in slots.enumerated() {
            let users = Set(Self.userRange(slot.users))
            let ackedSeqs = Set(acks.filter { $0.slot == s && $0.seq > 0 }.map(\.seq))
            let ackedPosts = Set(acks.filter { $0.slot == s && $0.kind == "post" }.map(\.postID))
            let unacknowledged = log.filter { event in
                users.contains(event.userID)
                    && (event.kind == .postCreated ? !ackedPosts.contains(event.postID ?? "") : !ackedSeqs.contains(event.seq))
            }
            #expect(
                unacknowledged.count <= incarnations.values.filter { $0 == s }.count,
                "\(slot.name): \(unacknowledged.count) unacknowledged changes for \(perSlot[s]) kills: \(unacknowledged.prefix(5).map(\.seq))"
            )
        }
        #expect(try service.check().map(\.description) == [])
        try expectReplayMatchesLikes(service, log)
        print(
            "PostgresFaultTests[\(backend)]: \(Self.kills) SIGKILLs in \(Watchdog.format(ContinuousClock.now - started)); "
                + "\(acks.filter { $0.seq > 0 || $0.kind == "post" }.count) acknowledged changes, \(log.count) events; "
                + "\(lingering.lingering) killed clients' server sessions had not ended yet")
    }

    // MARK: - Helpers

    /// Follows a child's output until `isDone` holds or it exits; each new line is a step for the watchdog.
    static func follow(
        _ child: Child, worker: Watchdog.Worker, describe: @escaping ([String]) -> String, until isDone: @escaping ([String]) -> Bool
    ) {
        var seen = -1
        while true {
            let lines = child.lines.values
            if lines.count != seen {
                seen = lines.count
                worker.step(describe(lines))
            }
            if isDone(lines) || !child.process.isRunning { break }
            _ = child.lines.wait(seconds: 0.5) { $0.count > lines.count }
        }
        worker.step("waiting for the process to exit")
        _ = child.wait(seconds: 30)
    }

    /// `done K count C changed H unchanged U posts P refused R unexpected E`.
    static func doneLine(_ line: String?) -> (changed: Int, posts: Int, refused: Int)? {
        guard let words = line?.split(separator: " "), words.first == "done", words.count == 14 else { return nil }
        guard let changed = Int(words[5]), let posts = Int(words[9]), let refused = Int(words[11]) else { return nil }
        return (changed, posts, refused)
    }

    /// `A-B` → `userA`…`userB`.
    static func userRange(_ text: String) -> [String] {
        let bounds = text.split(separator: "-").compactMap { Int($0) }
        return (bounds[0]...bounds[1]).map { "user\($0)" }
    }

    /// Every acknowledged change must be in the log with its kind, user and post, and in the tables.
    static func ackProblems(_ acks: [Ack], log: [EventRecord], service: FeedService) -> [String] {
        let bySeq = Dictionary(log.map { ($0.seq, $0) }, uniquingKeysWith: { first, _ in first })
        let created = Dictionary(
            log.filter { $0.kind == .postCreated }.map { ($0.postID ?? "", $0) }, uniquingKeysWith: { first, _ in first })
        var problems: [String] = []
        for ack in acks {
            if ack.kind == "post" {
                if created[ack.postID]?.userID != ack.userID {
                    problems.append("post \(ack.postID) by \(ack.userID): no postCreated event")
                }
                if (try? service.post(id: ack.postID, viewerID: nil)) == nil {
                    problems.append("post \(ack.postID): not in the posts table")
                }
            } else if ack.seq > 0 {
                guard let event = bySeq[ack.seq] else {
                    problems.append("seq \(ack.seq) (\(ack.kind) \(ack.userID) \(ack.postID)): not in the log")
                    continue
                }
                if event.kind.rawValue != ack.kind || event.userID != ack.userID || event.postID != ack.postID {
                    problems.append(
                        "seq \(ack.seq): acknowledged \(ack.kind) \(ack.userID) \(ack.postID), the log has \(event.kind) \(event.userID) \(event.postID ?? "-")"
                    )
                }
            }
        }
        return problems
    }

    /// The test's own sessions on a PostgreSQL server: the pool's connections (`application_name` `feedsync`) in the
    /// test's database, taken before client processes connect. Empty on SQLite.
    static func sessions(_ service: FeedService, on backend: TestBackend, butThisOne: Bool = false) throws -> Set<Int64> {
        guard backend == .postgresql else { return [] }
        let sql = """
            SELECT pid FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'feedsync'\(butThisOne ? " AND pid <> pg_backend_pid()" : "")
            """
        return Set(try service.firstColumn(sql).compactMap(\.integer))
    }

    /// Waits, bounded at 30 s, until every other pool session in the test's database has ended — a killed client's,
    /// which still runs and may commit the statement it was sent until it finds the client gone. Returns whether they
    /// ended and how many there were at first, with what those still there were doing when they did not end. At once
    /// on SQLite, where a killed client leaves nothing running.
    static func sessionsEnded(
        _ service: FeedService, on backend: TestBackend, except own: Set<Int64>, within seconds: Double = 30
    ) -> (ended: Bool, lingering: String) {
        guard backend == .postgresql else { return (true, "0") }
        var first: Int?
        var left: Set<Int64> = []
        let ended = eventually(seconds: seconds) {
            // Sessions this process opened since `own` was taken (a pool that grew, a watch that reconnected) are not
            // a killed client's: only sessions whose client port is not one of this process's sockets count. A change
            // watch's session only reads the log head and cannot commit anything, so it is not waited for (a live one
            // polls every 250 ms and would keep the wait going).
            let ports = ownClientPorts()
            let sql = """
                SELECT pid FROM pg_stat_activity
                WHERE datname = current_database() AND application_name = 'feedsync' AND pid <> pg_backend_pid()
                  AND NOT (client_port = ANY ($1::int[])) AND query NOT LIKE '%/* feedsync change watch */%'
                """
            let listed = try? service.backend.read { tx in
                try tx.userStatements.fetch(sql, [.text("{" + ports.map(String.init).joined(separator: ",") + "}")])
            }
            guard let rows = listed else { return false }
            let others = Set(rows.compactMap { $0.first?.integer }).subtracting(own)
            if first == nil { first = others.count }
            left = others
            return others.isEmpty
        }
        guard !ended else { return (true, "\(first ?? -1)") }
        // What the sessions still there are doing, for the failure's message.
        let detail = try? service.backend.read { tx in
            try tx.userStatements.fetch(
                """
                SELECT pid, state, wait_event_type, wait_event, client_port,
                       round(extract(epoch FROM now() - backend_start)), round(extract(epoch FROM now() - state_change)),
                       left(query, 80)
                FROM pg_stat_activity WHERE pid = ANY ($1::int[])
                """, [.text("{" + left.map(String.init).joined(separator: ",") + "}")])
        }
        return (false, "\(first ?? -1) (still there: \(detail.map { "\($0)" } ?? "unknown"))")
    }

    static func environmentInt(_ name: String, _ defaultValue: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap { Int($0) }.map { max($0, 1) } ?? defaultValue
    }
}

/// One line of `agent-acks`: `ack SEQ KIND USER POST` or `post ID USER`.
struct Ack: Sendable {
    let slot: Int
    let seq: Int64
    let kind: String
    let userID: String
    let postID: String

    init?(_ line: String, slot: Int) {
        let words = line.split(separator: " ").map(String.init)
        self.slot = slot
        if words.count == 5, words[0] == "ack", let seq = Int64(words[1]) {
            (self.seq, kind, userID, postID) = (seq, words[2], words[3], words[4])
        } else if words.count == 3, words[0] == "post" {
            (seq, kind, userID, postID) = (0, "post", words[2], words[1])
        } else {
            return nil
        }
    }
}

/// Replaying the whole log (liked adds the pair, unliked removes it) must give exactly the likes table.
func expectReplayMatchesLikes(_ service: FeedService, _ log: [EventRecord], sourceLocation: SourceLocation = #_sourceLocation) throws {
    var replayed = Set<String>()
    for event in log {
        switch event.kind {
        case .liked: replayed.insert("\(event.userID) \(event.postID ?? "")")
        case .unliked: replayed.remove("\(event.userID) \(event.postID ?? "")")
        default: break
        }
    }
    let table = try service.firstColumn(
        "SELECT u.id || ' ' || p.id FROM likes l JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key")
    let rows = Set(table.compactMap { value -> String? in if case .text(let text) = value { text } else { nil } })
    #expect(rows.count == table.count, "every likes row reads as text", sourceLocation: sourceLocation)
    let missing = replayed.subtracting(rows).sorted()
    let extra = rows.subtracting(replayed).sorted()
    #expect(
        missing.isEmpty && extra.isEmpty,
        "log replay differs from the likes table: \(missing.count) replayed but not in the table \(missing.prefix(5)), \(extra.count) in the table but not replayed \(extra.prefix(5))",
        sourceLocation: sourceLocation)
}

/// The reference LCG, for the tests' own random choices.
struct FaultRandom {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ bound: Int) -> Int {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Int((state >> 33) % UInt64(bound))
    }
}

/// The local TCP ports of this process's sockets (from `/proc/self/fd` and `/proc/net/tcp`, `tcp6`): the client ports
/// of its own database sessions.
func ownClientPorts() -> Set<Int> {
    var inodes: Set<String> = []
    for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
        if let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name),
            target.hasPrefix("socket:[")
        {
            inodes.insert(String(target.dropFirst("socket:[".count).dropLast()))
        }
    }
    var ports: Set<Int> = []
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        guard let text = try? String(contentsOfFile: table, encoding: .utf8) else { continue }
        for line in text.split(separator: "\n").dropFirst() {
            let fields = line.split(separator: " ")
            guard fields.count > 9, inodes.contains(String(fields[9])),
                let port = fields[1].split(separator: ":").last.flatMap({ Int($0, radix: 16) })
            else { continue }
            ports.insert(port)
        }
    }
    return ports
}
