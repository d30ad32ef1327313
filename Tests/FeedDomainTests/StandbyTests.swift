import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// A PostgreSQL primary with a streaming standby (`pg_basebackup`, on loopback, started and removed by the test):
/// `status` says which server it reached and whether it takes writes, a write sent to the standby fails with one line
/// and exit status 75, a multi-host URL with `target_session_attrs=read-write` finds the primary, and once the standby
/// is promoted it takes the writes.
// Blocks: runs `feedsync` and `.ci/postgres-server.sh` as child processes and waits for them.
@Suite(.serialized, .ownThreads) struct StandbyTests {
    @Test func aStandbySaysSoRefusesWritesInOneLineAndTakesThemOncePromoted() throws {
        guard let parent = try PostgresFaultTests.restartableServerParent() else { return }
        let cli = URL(fileURLWithPath: try benchExecutable()).deletingLastPathComponent().appendingPathComponent("feedsync").path
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let primaryDir = parent + "/primary-" + tag, standbyDir = parent + "/standby-" + tag
        let primary = try PostgresFaultTests.script(["start", primaryDir], timeout: 60)
        defer { _ = try? PostgresFaultTests.script(["stop", primaryDir], timeout: 60) }
        let home = TemporaryDirectory("feedsync-standby")
        func feedsync(_ arguments: String...) throws -> (status: Int32, stdout: String, stderr: String) {
            try SpawnedProcess.run(cli, arguments, environment: ["PATH": "/usr/bin:/bin", "HOME": home.path, "LANG": "C.UTF-8"])
        }
        let seeded = try feedsync("--db", primary, "seed", "--posts", "20", "--users", "5", "--likes", "10")
        #expect(seeded.status == 0, "\(seeded.stderr)")

        let standbyPort = try PostgresFaultTests.script(["standby", standbyDir, primaryDir], timeout: 120)
        defer { _ = try? PostgresFaultTests.script(["stop", standbyDir], timeout: 60) }
        let primaryPort = try #require(URLComponents(string: primary)?.port)
        let standby = primary.replacingOccurrences(of: ":\(primaryPort)/", with: ":\(standbyPort)/")
        let password = try #require(URLComponents(string: primary)?.password)

        // A like on the primary reaches the standby (streaming, asynchronous): wait for it, bounded.
        #expect(try feedsync("--db", primary, "--user", "user1", "like", "post1").status == 0)
        let replayed = eventually(seconds: 30) {
            (try? feedsync("--db", standby, "--user", "user1", "feed", "--json").stdout.contains("\"liked\":true")) ?? false
        }
        #expect(replayed, "the standby replays the primary's like")

        let status = try feedsync("--db", standby, "status")
        #expect(status.status == 0, "\(status.stderr)")
        #expect(status.stdout.contains("server              127.0.0.1:\(standbyPort) (standby: read-only)"), "\(status.stdout)")
        #expect(!status.stdout.contains(password) && !status.stderr.contains(password))
        let statusJSON = try feedsync("--db", standby, "status", "--json").stdout
        #expect(statusJSON.contains("\"server\":\"127.0.0.1:\(standbyPort)\",\"primary\":false"), "\(statusJSON)")

        // A write sent to the standby: one line, exit 75 (it may take writes after a failover), nothing written.
        let refused = try feedsync("--db", standby, "--user", "user2", "like", "post1")
        #expect(refused.status == 75)
        #expect(refused.stdout.isEmpty)
        let lines = refused.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines.first?.hasPrefix("Error: the server of ") == true, "\(refused.stderr)")
        #expect(refused.stderr.contains("takes no writes: it is a read-only standby"))
        #expect(!refused.stderr.contains(password))

        // Both servers in one URL, the standby first: libpq skips it for the primary, and the like commits there.
        let components = try #require(URLComponents(string: primary))
        let path = components.path
        let multiHost =
            "postgresql://\(components.user ?? ""):\(password)@127.0.0.1:\(standbyPort),127.0.0.1:\(primaryPort)\(path)"
            + "?target_session_attrs=read-write"
        let liked = try feedsync("--db", multiHost, "--user", "user2", "like", "post1", "--json")
        #expect(liked.status == 0, "\(liked.stderr)")
        #expect(liked.stdout.contains("\"changed\":true"))
        let reached = try feedsync("--db", multiHost, "status")
        #expect(reached.stdout.contains("127.0.0.1:\(primaryPort) (primary)"), "\(reached.stdout)")

        // Promoted, the standby takes writes: the same command now commits there.
        try PostgresFaultTests.script(["promote", standbyDir], timeout: 90)
        let promoted = try feedsync("--db", standby, "--user", "user3", "like", "post2")
        #expect(promoted.status == 0, "\(promoted.stderr)")
        #expect(try feedsync("--db", standby, "status").stdout.contains("127.0.0.1:\(standbyPort) (primary)"))
        #expect(try feedsync("--db", standby, "check").status == 0)
    }
}
