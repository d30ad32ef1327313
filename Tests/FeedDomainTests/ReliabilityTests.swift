import FeedSync
import FeedCore
import FeedDomain
import FeedSQLite
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// Blocks: waits for agent child processes, some killed with SIGKILL.
@Suite(.serialized, .ownThreads) struct ReliabilityTests {
    /// Processes and commands per process; `FEEDSYNC_LOAD_OPS` changes the count.
    static let loadProcesses = 4
    static let loadOps = Int(ProcessInfo.processInfo.environment["FEEDSYNC_LOAD_OPS"] ?? "") ?? 5000

    @Test func concurrentProcessesNeverFailAndKeepEveryInvariant() throws {
        let bench = try benchExecutable()
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        let service = try FeedService(path: path)
        try service.seed(SeedPlan(posts: 50, users: 20, likes: 0))
        let baseline = try service.status().lastSeq
        // `--busy-timeout 15`, as in `PostgresFaultTests`: on a machine running every suite at once a process can be
        // kept out of the write lock past the library's 5 s; no command may fail within 15 s.
        let children = try (1...Self.loadProcesses).map { seed in
            try Child(bench, ["agent-load", "--db", path, "--ops", String(Self.loadOps), "--seed", String(seed), "--busy-timeout", "15"])
        }
        for child in children {
            #expect(child.wait(seconds: 600))
            #expect(child.process.terminationStatus == 0, "a command failed (see stderr), e.g. database is locked")
            #expect(child.lines.values.last == "done \(Self.loadOps) failures 0")
        }
        #expect(try service.check().isEmpty)
        let events = try service.events(after: baseline)
        #expect(zip(events, events.dropFirst()).allSatisfy { $0.seq + 1 == $1.seq })
        // The seeded database starts with no likes, so replaying the new events rebuilds the likes table.
        var replayed = Set<LikePair>()
        for event in events {
            guard let post = event.postID else { continue }
            if event.kind == .liked { replayed.insert(LikePair(userID: event.userID, postID: post)) }
            if event.kind == .unliked { replayed.remove(LikePair(userID: event.userID, postID: post)) }
        }
        #expect(replayed == (try service.store.read { db in try LikeRepository(db).allPairs() }))
    }

    @Test func killedWriterLosesNoAcknowledgedChange() throws {
        let bench = try benchExecutable()
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        do {
            let service = try FeedService(path: path)
            try service.seed(SeedPlan(posts: 50, users: 5, likes: 0))
            service.store.close()
        }
        var random = SystemRandomNumberGenerator()
        var acknowledged: [(seq: Int64, post: String, liked: Bool)] = []
        for round in 0..<25 {
            let child = try Child(bench, ["agent-crash", "--db", path, "--user", "user\(1 + round % 5)"])
            // Let it commit a random number of changes, then kill it mid-loop.
            let target = Int.random(in: 1...40, using: &random)
            #expect(child.lines.wait { $0.count >= target })
            child.kill()
            for line in child.lines.values {
                let parts = line.split(separator: " ")
                guard parts.count == 4, parts[0] == "ack", let seq = Int64(parts[1]) else { continue }
                acknowledged.append((seq, String(parts[2]), parts[3] == "1"))
            }
            // Reopen after every kill: integrity and invariants hold, every acknowledged seq is there.
            let service = try FeedService(path: path)
            let violations = try service.check()
            #expect(violations.isEmpty, "round \(round): \(violations)")
            let integrity = try service.store.read { db in try db.fetchOne("PRAGMA integrity_check") { $0.string(at: 0) } }
            #expect(integrity == "ok")
            let logged = Set(try service.events(after: 0).map(\.seq))
            #expect(acknowledged.allSatisfy { logged.contains($0.seq) }, "round \(round): an acknowledged change is missing")
            service.store.close()
        }
        #expect(acknowledged.count >= 25)
    }
}
