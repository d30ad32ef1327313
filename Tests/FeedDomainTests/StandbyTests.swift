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
        guard
            let pair = try StandbyPair(
                "standby",
                prepare: { primary throws in
                    let seeded = try primary.feedsync("--db", primary.primary, "seed", "--posts", "20", "--users", "5", "--likes", "10")
                    #expect(seeded.status == 0, "\(seeded.stderr)")
                })
        else { return }
        // The servers go when the pair is released: not before the test ends.
        defer { withExtendedLifetime(pair) {} }
        let (primary, standby, standbyPort, password) = (pair.primary, pair.standby, pair.standbyPort, pair.password)
        let feedsync = pair.feedsync

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
        let multiHost =
            "postgresql://\(components.user ?? ""):\(password)@127.0.0.1:\(standbyPort),127.0.0.1:\(pair.primaryPort)"
            + "\(components.path)?target_session_attrs=read-write"
        let liked = try feedsync("--db", multiHost, "--user", "user2", "like", "post1", "--json")
        #expect(liked.status == 0, "\(liked.stderr)")
        #expect(liked.stdout.contains("\"changed\":true"))
        let reached = try feedsync("--db", multiHost, "status")
        #expect(reached.stdout.contains("127.0.0.1:\(pair.primaryPort) (primary)"), "\(reached.stdout)")

        // Promoted, the standby takes writes: the same command now commits there.
        try pair.script("promote", pair.standbyDir)
        let promoted = try feedsync("--db", standby, "--user", "user3", "like", "post2")
        #expect(promoted.status == 0, "\(promoted.stderr)")
        #expect(try feedsync("--db", standby, "status").stdout.contains("127.0.0.1:\(standbyPort) (primary)"))
        #expect(try feedsync("--db", standby, "check").status == 0)
    }

    /// The primary's machine dies (`pg_ctl stop -m immediate`, its data kept) once the standby has replayed every
    /// commit, and the standby is promoted: with one multi-host URL, a CLI writer's next command commits on the new
    /// primary, and an `events --follow` and a `feedsync serve` (with an event stream open on it, read by `curl`)
    /// started before the failover go on there — each seq once, in order — without being restarted: the stream gets the
    /// new like, and the server takes a like itself.
    @Test func writersAndAFollowerGoOnToThePromotedStandbyByThemselves() throws {
        guard
            let pair = try StandbyPair(
                "failover",
                prepare: { primary throws in
                    #expect(
                        try primary.feedsync("--db", primary.primary, "seed", "--posts", "20", "--users", "5", "--likes", "0").status == 0)
                })
        else { return }
        // The servers go when the pair is released: not before the test ends.
        defer { withExtendedLifetime(pair) {} }
        let (cli, environment, both, standby, password) = (pair.cli, pair.environment, pair.both, pair.standby, pair.password)
        let feedsync = pair.feedsync
        let seqs = StandbyPair.seqs

        let follower = try Child(cli, ["--db", both, "events", "--follow", "--json"], environment: environment, capturingErrors: true)
        defer { follower.kill() }
        let issued = try feedsync("--db", both, "--user", "user3", "token", "issue", "--json")
        let token = try #require(
            issued.stdout.range(of: #""token":"[^"]+""#, options: .regularExpression).map {
                String(issued.stdout[$0].dropFirst(9).dropLast())
            },
            "\(issued.stdout)")
        let server = try Child(cli, ["--db", both, "serve", "--listen", "127.0.0.1:0"], environment: environment, capturingErrors: true)
        defer { server.kill() }
        #expect(server.lines.wait(seconds: 30) { $0.contains { $0.contains("http://127.0.0.1:") } }, "serve prints its URL")
        let base = try #require(
            server.lines.values.lazy.compactMap { line in
                line.range(of: #"http://127\.0\.0\.1:\d+"#, options: .regularExpression).map { String(line[$0]) }
            }
            .first)
        let stream = try Child(
            "/usr/bin/curl", ["-sN", "-H", "Authorization: Bearer \(token)", base + "/api/events"], environment: environment)
        defer { stream.kill() }
        // The seqs of an event stream's `id: SEQ.CHECK` lines.
        func ids(_ lines: [String]) -> [Int64] {
            lines.compactMap { $0.hasPrefix("id: ") ? Int64($0.dropFirst(4).prefix { $0 != "." }) : nil }
        }
        func streamed() -> [Int64] { ids(stream.lines.values) }
        let first = try feedsync("--db", both, "--user", "user1", "like", "post1", "--json")
        #expect(first.status == 0, "\(first.stderr)")
        #expect(follower.lines.wait(seconds: 30) { seqs($0).count == 1 }, "the follower prints the first like")
        let primarySeq = try #require(seqs(follower.lines.values).last)
        #expect(stream.lines.wait(seconds: 30) { ids($0).last == primarySeq }, "the event stream sends the first like")
        // Synchronous in effect: the standby has every commit before the primary dies, so nothing is lost.
        let replayed = eventually(seconds: 30) {
            (try? feedsync("--db", standby, "status", "--json").stdout.contains("\"lastSeq\":\(primarySeq)")) ?? false
        }
        #expect(replayed, "the standby replays seq \(primarySeq)")

        let clock = ContinuousClock()
        try pair.script("halt", pair.primaryDir)
        let halted = clock.now
        try pair.script("promote", pair.standbyDir)
        // The writer: the same command, again and again, until it commits (bounded).
        var attempts = 0
        var committed: (status: Int32, stdout: String, stderr: String)?
        while committed == nil, clock.now - halted < .seconds(60) {
            attempts += 1
            let result = try feedsync("--db", both, "--user", "user2", "like", "post2", "--json")
            if result.status == 0 { committed = result } else { #expect(result.status == 75, "\(result.stderr)") }
        }
        let writerBack = clock.now - halted
        let like = try #require(committed, "a like committed on the promoted standby within 60 s")
        #expect(like.stdout.contains("\"changed\":true"))
        #expect(follower.lines.wait(seconds: 60) { seqs($0).count == 2 }, "the follower prints the like committed after the failover")
        let followerBack = clock.now - halted
        let printed = seqs(follower.lines.values)
        #expect(printed == [primarySeq, primarySeq + 1], "each seq once, in order: \(printed)")
        // The server: its stream got the like committed elsewhere, and a like sent to it commits on the new primary.
        #expect(stream.lines.wait(seconds: 60) { ids($0).last == primarySeq + 1 }, "the stream: \(streamed())")
        let served = try SpawnedProcess.run(
            "/usr/bin/curl", ["-s", "-X", "PUT", "-H", "Authorization: Bearer \(token)", base + "/api/posts/post3/like"],
            environment: environment)
        #expect(served.stdout.contains("\"changed\":true"), "serve's like after the failover: \(served.stdout)")
        #expect(stream.lines.wait(seconds: 30) { ids($0).last == primarySeq + 2 }, "the stream: \(streamed())")
        #expect(streamed() == [primarySeq, primarySeq + 1, primarySeq + 2], "each seq once, in order")
        #expect(!server.errorLines.values.joined().contains(password))
        #expect(try feedsync("--db", both, "status").stdout.contains("127.0.0.1:\(pair.standbyPort) (primary)"))
        #expect(try feedsync("--db", both, "check").status == 0)
        #expect(!follower.errorLines.values.joined().contains(password))
        print(
            "StandbyTests: from the primary's halt, the writer committed after \(attempts) attempts in \(writerBack), "
                + "the follower printed it after \(followerBack)")
    }
}
