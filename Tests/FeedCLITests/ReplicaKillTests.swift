import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// `feedsync sync` killed with SIGKILL at random moments — before it reached the source, after the source applied a
/// push but before the replica recorded the answer, in the middle of a pull — on several replicas of several users
/// while the source takes writes of its own. Then every replica syncs to the end: each equals the source for its
/// user, the source's counts equal its rows, every mutation was applied once, and nothing was rejected.
// Blocks: waits for `feedsync sync` child processes killed with SIGKILL.
@Suite(.ownThreads, .heavy) struct ReplicaKillTests {
    @Test(arguments: TestBackend.allCases)
    func syncKilledAtRandomMomentsLosesNothingAndAppliesNothingTwice(on backend: TestBackend) throws {
        let home = TemporaryDirectory("feedsync-replica-kill")
        guard let source = try backend.makeLocation(in: home, "source") else { return }
        let environment = CLIRun.environment(home: home.path)
        func feedsync(_ arguments: [String]) throws -> CLIResult { try CLIRun.run(arguments, environment: environment) }
        #expect(try feedsync(["--db", source, "demo"]).status == 0)
        let replicas = [("alice", "a1"), ("alice", "a2"), ("bob", "b1")].map { (user: $0.0, path: home.file($0.1 + ".sqlite")) }
        for replica in replicas {
            let made = try feedsync(["--db", replica.path, "replica", "init", "--from", source, "--user", replica.user])
            try #require(made.status == 0, "\(made.stderr)")
        }
        var random = SystemRandomNumberGenerator()
        var killedMidSync = 0
        for round in 0..<24 {
            let replica = replicas[round % replicas.count]
            for _ in 0..<Int.random(in: 1...6, using: &random) {
                let post = "post\(Int.random(in: 1...5, using: &random))"
                let changed = try feedsync(["--db", replica.path, "toggle", post])
                #expect(changed.status == 0, "\(changed.stderr)")
            }
            if round % 4 == 0 {
                let changed = try feedsync(["--db", replica.path, "post", "add", "round \(round) from \(replica.path)"])
                #expect(changed.status == 0, "\(changed.stderr)")
            }
            let other = try feedsync(["--db", source, "toggle", "post\(Int.random(in: 1...5, using: &random))", "--user", "carol"])
            #expect(other.status == 0, "\(other.stderr)")
            let sync = try RunningCLI(["--db", replica.path, "sync"], environment: environment)
            Thread.sleep(forTimeInterval: Double.random(in: 0...0.06, using: &random))  // a random moment to kill it, not a wait
            if sync.kill() { killedMidSync += 1 }
        }
        #expect(killedMidSync > 0, "no sync was killed while it ran")

        for _ in 0..<2 {
            for replica in replicas {
                let done = try feedsync(["--db", replica.path, "sync", "--json"])
                try #require(done.status == 0, "\(done.stderr)")
            }
        }
        let sourceService = try FeedService(location: source)
        defer { sourceService.close() }
        #expect(try sourceService.check().isEmpty)
        for replica in replicas {
            let service = try FeedService(location: replica.path)
            defer { service.close() }
            let status = try #require(try service.replicaStatus())
            #expect(status.pendingChanges == 0 && status.rejectedChanges == 0, "\(status)")
            #expect(try service.check().isEmpty)
            func rows(_ service: FeedService) throws -> Set<String> {
                Set(
                    try service.feedPage(viewerID: replica.user, limit: 1000).rows.map { "\($0.post.id) ❤️\($0.post.likeCount) \($0.liked)" }
                )
            }
            #expect(try rows(service) == rows(sourceService), "\(replica.path) equals the source for \(replica.user)")
            let made = try service.backend.read { tx in
                try tx.userStatements.fetch("SELECT seq FROM sqlite_sequence WHERE name = 'replica_mutations'", []).first?.first
            }
            let applied = try sourceService.backend.read { tx in
                try tx.userStatements.fetch("SELECT last_mutation FROM sync_clients WHERE client_id = $1", [.text(status.clientID)]).first?
                    .first
            }
            #expect(applied == made, "the source handled each of \(replica.path)'s numbers once")
        }
        let bodies = try sourceService.feedPage(viewerID: nil, limit: 1000).rows.map(\.post.body)
        #expect(Set(bodies).count == bodies.count, "no post was created twice")
    }
}
