import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// The network between FeedSync and a real PostgreSQL server fails: every connection reset, the server gone
/// silent (a partition: nothing forwarded, nothing closed), healed again. A ``FaultProxy`` on loopback stands between
/// the clients and the test server; the test's own "other machine" reaches the server directly.
///
/// Bounds checked here are the documented ones (`Docs/Reliability.md`): with default settings a command fails within
/// the 20 s response timeout (10 s when it must connect), and a follower delivers a change made after the heal
/// within 30 s.
// Blocks: waits through network partitions and server restarts for timeouts, followers and writer processes.
@Suite(.ownThreads) struct NetworkFaultTests {
    /// A test database on the PostgreSQL test server, its direct URL, and a proxy in front of it.
    struct Network {
        let dir: TemporaryDirectory
        let direct: String
        let proxy: FaultProxy
        /// The database through the proxy, with FeedSync's default settings.
        let proxied: String

        /// The database through the proxy, with libpq's connect timeout at its 2 s minimum (for tests that run through
        /// many faults and would otherwise wait 10 s for each connection attempt into a partition).
        var proxiedQuick: String { proxied + (proxied.contains("?") ? "&" : "?") + "connect_timeout=2" }
        /// The proxied URL with a 5 s connect timeout, for the long run under load: on a loaded machine a connection's
        /// start (a server process, authentication) through the proxy can take longer than 2 s.
        var proxiedUnderLoad: String { proxied + (proxied.contains("?") ? "&" : "?") + "connect_timeout=5" }

        init?(_ label: String) throws {
            dir = TemporaryDirectory()
            guard let url = try TestBackend.postgresql.makeLocation(in: dir, label) else { return nil }
            direct = url
            proxy = try FaultProxy(upstreamURL: url)
            proxied = proxy.url(replacingPortOf: url)
        }
    }

    // MARK: - Resets

    /// Every connection is reset (as by a restarted server or a load balancer that dropped them): the pooled ones are
    /// found dead before use or retried once, and the next commands — reads and writes — succeed at once.
    @Test func aResetOfEveryConnectionNeverReachesACaller() throws {
        guard let network = try Network("net_reset") else { return }
        let service = try makeService(at: network.proxied)
        Self.warm(service, connections: 4)
        #expect(network.proxy.openPairs >= 2, "several pooled connections are open")
        for round in 1...3 {
            network.proxy.resetAll()
            let result = try service.toggle(userID: "user2", postID: "post1")
            #expect(result.changed, "round \(round)")
            let failures = LockedLog<String>()
            DispatchQueue.concurrentPerform(iterations: 4) { index in
                do {
                    _ = try service.feedPage(viewerID: "user\(1 + index % 3)", limit: 20)
                } catch {
                    failures.append("\(error)")
                }
            }
            #expect(failures.values == [], "round \(round)")
        }
        #expect(try service.check().map(\.description) == [])
    }

    // MARK: - A server that vanished

    /// A partition with a tight response timeout: a command on a pooled connection and the opening of a new service
    /// each fail with one typed `connectionLost` within their bound, and the command after the heal succeeds.
    @Test func aCommandToAVanishedServerFailsWithinItsResponseTimeout() throws {
        guard let network = try Network("net_vanished") else { return }
        var options = FeedOpenOptions()
        options.responseTimeout = .seconds(2)
        options.statementTimeout = .seconds(1)
        let service = try makeService(at: network.proxiedQuick, options: options)
        Self.warm(service, connections: 2)
        network.proxy.blackhole()

        let start = ContinuousClock.now
        let error = try #require(throws: FeedError.self) { try service.like(userID: "user2", postID: "post1") }
        let elapsed = ContinuousClock.now - start
        guard case .storage(.connectionLost) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(error.category == .busy)
        #expect(elapsed >= .milliseconds(1900) && elapsed < .seconds(8), "failed after \(elapsed)")

        let openStart = ContinuousClock.now
        #expect(throws: FeedError.self) { try FeedService(location: network.proxiedQuick, options: options) }
        let openElapsed = ContinuousClock.now - openStart
        #expect(openElapsed < .seconds(8), "opening failed after \(openElapsed)")

        network.proxy.heal()
        #expect(try service.like(userID: "user2", postID: "post1").changed)
        print("NetworkFaultTests: a partitioned command failed after \(elapsed) (2 s response timeout), opening after \(openElapsed)")
    }

    /// With every default: a command on an established connection into a partition fails after the 20 s response
    /// timeout, and `feedsync like` (which must connect) prints one line and exits 75 within the 10 s connect timeout.
    @Test func withDefaultSettingsNoCommandWaitsLongerThanItsDocumentedBound() throws {
        guard let network = try Network("net_defaults") else { return }
        let service = try makeService(at: network.proxied)
        Self.warm(service, connections: 1)
        let cli = try Self.cliExecutable()
        let password = URLComponents(string: network.direct)?.password ?? network.direct
        network.proxy.blackhole()

        let cliRun = Thread.detachedResult {
            let start = ContinuousClock.now
            let run = PostgresFaultTests.runCLI(cli, ["--db", network.proxied, "--user", "user2", "like", "post2"])
            return (run, ContinuousClock.now - start)
        }
        let start = ContinuousClock.now
        let error = try #require(throws: FeedError.self) { try service.like(userID: "user2", postID: "post1") }
        let elapsed = ContinuousClock.now - start
        #expect(error.category == .busy, "\(error)")
        #expect(elapsed >= .seconds(19) && elapsed <= .seconds(30), "the command failed after \(elapsed)")

        let (run, cliElapsed) = try #require(cliRun.wait(seconds: 60))
        #expect(run.status == 75 && run.lines.count == 1, "status \(run.status): \(run.lines)")
        #expect(run.lines.first?.hasPrefix("Error: ") == true)
        #expect(!run.lines.contains { $0.contains(password) }, "the CLI printed the password")
        #expect(cliElapsed <= .seconds(30), "feedsync like took \(cliElapsed)")
        print(
            "NetworkFaultTests: defaults into a partition — a pooled command failed after \(elapsed), feedsync like "
                + "exited \(run.status) after \(cliElapsed): \(run.lines.first ?? "")")
    }

    // MARK: - Followers

    /// A partition long enough for the follower to find its listening connection dead, then a heal: a change made
    /// by another machine after the heal reaches the bridge, a `changes(after:)` stream and `feedsync events
    /// --follow`, each once, within 30 s, with default settings everywhere.
    @Test func aFollowerNoticesItsDeadConnectionAndDeliversAChangeMadeAfterTheHeal() throws {
        guard let network = try Network("net_follower") else { return }
        let cli = try Self.cliExecutable()
        let service = try makeService(at: network.proxied)
        let other = try FeedService(location: network.direct)
        let head = try other.events(after: 0).last?.seq ?? 0
        let feed = ChangeFeed(service: service)
        let feedErrors = Recorder(feed.errors)
        let received = Recorder(service.bridge.changes)
        try feed.start()
        defer { feed.stop() }
        let streamed = LockedLog<Int64>()
        // On a thread of its own: the cooperative pool may be busy with other suites' tests.
        let stream = Task(executorPreference: ThreadPerJobExecutor.shared) {
            for try await batch in service.changes(after: head) { for event in batch { streamed.append(event.seq) } }
        }
        defer { stream.cancel() }
        let follower = try Child(cli, ["--db", network.proxied, "events", "--follow", "--json", "--since", String(head)])
        defer { follower.kill() }

        // Before the fault: everything flows.
        let first = try #require(try other.like(userID: "user3", postID: "post3").seq)
        #expect(received.wait(seconds: 30) { $0.contains { $0.seq == first } })
        #expect(follower.lines.wait(seconds: 30) { Self.seqs($0).contains(first) })

        network.proxy.blackhole()
        let during = try #require(try other.like(userID: "user3", postID: "post2").seq)
        // The partition lasts until the follower has found its connection dead (its ping went unanswered).
        #expect(feedErrors.wait(seconds: 30) { !$0.isEmpty }, "the feed never noticed the partition")
        network.proxy.heal()
        let healed = ContinuousClock.now
        let after = try #require(try other.like(userID: "user3", postID: "post1").seq)

        let bridgeOK = received.wait(seconds: 30) { $0.contains { $0.seq == after } }
        let bridgeLatency = ContinuousClock.now - healed
        let streamOK = streamed.wait(seconds: 30) { $0.contains(after) }
        let cliOK = follower.lines.wait(seconds: 30) { Self.seqs($0).contains(after) }
        let cliLatency = ContinuousClock.now - healed
        #expect(bridgeOK && bridgeLatency <= .seconds(30), "the bridge: \(received.values.map(\.seq)) after \(bridgeLatency)")
        #expect(streamOK, "changes(after:): \(streamed.values)")
        #expect(cliOK, "events --follow: \(follower.lines.values.suffix(5))")
        #expect(follower.process.isRunning, "the follower survived")

        let expected = [first, during, after]
        #expect(received.values.map(\.seq).filter { $0 > head } == expected, "the bridge: each seq once, in order")
        #expect(streamed.values == expected, "changes(after:): each seq once, in order")
        #expect(Self.seqs(follower.lines.values) == expected, "events --follow: each seq once, in order")
        print(
            "NetworkFaultTests: after the heal the bridge had the next change in \(bridgeLatency), events --follow in "
                + "\(cliLatency) (feed errors during the partition: \(feedErrors.values.count))")
    }

    /// `feedsync events --follow` with `FEEDSYNC_RESPONSE_TIMEOUT_MS=1000` and `FEEDSYNC_LOG=warning`: a partition is
    /// found (its watch's ping waits at most the response timeout, here 1 s, not the default 5 s) and reported as one
    /// `changeWatch.failed` line on stderr within 4 s; after the heal the next change is printed, and the log names no
    /// password.
    @Test func theCLIFollowerHonoursItsResponseTimeoutAndLogsThePartition() throws {
        guard let network = try Network("net_cli_timeout") else { return }
        let cli = try Self.cliExecutable()
        let other = try makeService(at: network.direct)
        let head = try other.status().lastSeq
        let follower = try Child(
            cli, ["--db", network.proxiedQuick, "events", "--follow", "--json", "--since", String(head)],
            environment: ["FEEDSYNC_RESPONSE_TIMEOUT_MS": "1000", "FEEDSYNC_LOG": "warning"], capturingErrors: true)
        defer { follower.kill() }
        let first = try #require(try other.like(userID: "user3", postID: "post3").seq)
        #expect(follower.lines.wait(seconds: 30) { Self.seqs($0).contains(first) })
        #expect(follower.errorLines.values == [], "nothing logged before the fault")

        network.proxy.blackhole()
        let start = ContinuousClock.now
        let noticed = follower.errorLines.wait(seconds: 30) { $0.contains { $0.contains("changeWatch.failed") } }
        let elapsed = ContinuousClock.now - start
        network.proxy.heal()
        #expect(noticed, "no changeWatch.failed line: \(follower.errorLines.values)")
        #expect(elapsed < .seconds(4), "the follower found the partition after \(elapsed)")

        let after = try #require(try other.like(userID: "user3", postID: "post1").seq)
        #expect(follower.lines.wait(seconds: 30) { Self.seqs($0).contains(after) }, "\(follower.lines.values.suffix(3))")
        #expect(Self.seqs(follower.lines.values) == [first, after], "each seq once, in order")
        let password = URLComponents(string: network.direct)?.password ?? network.direct
        #expect(follower.errorLines.values.allSatisfy { $0.hasPrefix("feedsync: [") && !$0.contains(password) })
        print("NetworkFaultTests: events --follow logged the partition after \(elapsed): \(follower.errorLines.values.first ?? "")")
    }

    // MARK: - Server restarts

    /// The server is crash-restarted (`pg_ctl restart -m immediate`) five times, and each time, after a pause, another
    /// process likes a post. Its first command after the restart succeeds (its pooled connections died with the
    /// server), and a follower in this process and `feedsync events --follow` each deliver that like — with no later
    /// commit to prompt them — once, in order, within 30 s.
    ///
    /// The server is a private one next to the shared test server, as in ``PostgresFaultTests``.
    @Test func aChangeAfterAServerRestartReachesEveryFollowerWithoutALaterCommit() throws {
        guard let serverParent = try PostgresFaultTests.restartableServerParent() else { return }
        let cli = try Self.cliExecutable()
        let serverDir = serverParent + "/restarts-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let url = try PostgresFaultTests.script(["start", serverDir], timeout: 60)
        defer { _ = try? PostgresFaultTests.script(["stop", serverDir], timeout: 60) }
        let follower = try makeService(at: url)
        let other = try FeedService(location: url)
        let head = try other.status().lastSeq
        let feed = ChangeFeed(service: follower)
        let received = Recorder(follower.bridge.changes)
        try feed.start()
        defer { feed.stop() }
        let printer = try Child(cli, ["--db", url, "events", "--follow", "--json", "--since", String(head)])
        defer { printer.kill() }

        // Both followers are up (the printer has opened its database) before the first restart.
        let ready = try #require(try other.like(userID: "user3", postID: "post3").seq)
        #expect(received.wait(seconds: 30) { $0.contains { $0.seq == ready } })
        #expect(printer.lines.wait(seconds: 30) { Self.seqs($0).contains(ready) }, "events --follow started")
        var expected: [Int64] = [ready]
        var latencies: [Duration] = []
        for (round, pause) in [200, 2000, 3500, 700, 5000].enumerated() {
            Self.warm(other, connections: 3)
            _ = try PostgresFaultTests.script(["restart", serverDir], timeout: 60)
            usleep(UInt32(pause) * 1000)  // the scenario's pause before the next like, not a wait for an event
            let result: LikeResult
            do {
                result = try other.toggle(userID: "user2", postID: "post\(1 + round % 3)")
            } catch {
                Issue.record("round \(round + 1): the first command after the restart failed: \(error)")
                continue
            }
            let seq = try #require(result.seq)
            expected.append(seq)
            let committed = ContinuousClock.now
            let delivered = received.wait(seconds: 30) { $0.contains { $0.seq == seq } }
            latencies.append(ContinuousClock.now - committed)
            let printed = printer.lines.wait(seconds: 30) { Self.seqs($0).contains(seq) }
            #expect(delivered, "round \(round + 1) (pause \(pause) ms): the follower never delivered seq \(seq)")
            #expect(printed, "round \(round + 1) (pause \(pause) ms): events --follow never printed seq \(seq)")
        }
        #expect(received.values.map(\.seq).filter { $0 > head } == expected, "the bridge: each seq once, in order")
        #expect(Self.seqs(printer.lines.values) == expected, "events --follow: each seq once, in order")
        #expect(printer.process.isRunning)
        #expect(try other.check().map(\.description) == [])
        print("NetworkFaultTests: five server restarts; each like reached the follower in \(latencies.map(Watchdog.format))")
    }

    // MARK: - Helpers

    /// Opens up to `connections` pooled connections by running that many reads at once.
    /// Opens `connections` pooled connections of `service`: as many threads each read a page and keep their
    /// connection until every one of them holds one (at most 10 s), so that the pool cannot hand one connection from
    /// read to read however the threads are scheduled.
    static func warm(_ service: FeedService, connections: Int) {
        let holding = DispatchGroup()
        let finished = DispatchGroup()
        for _ in 0..<connections {
            holding.enter()
            finished.enter()
        }
        for _ in 0..<connections {
            Thread.detachNewThread {
                var held = false
                _ = try? service.backend.readOnce { tx in
                    _ = try? tx.feedPage(for: .anonymous, before: nil, limit: 20).rows
                    held = true
                    holding.leave()
                    _ = holding.wait(timeout: .now() + 10)
                }
                // A read that could not get a connection holds none: the others need not wait for it.
                if !held { holding.leave() }
                finished.leave()
            }
        }
        _ = finished.wait(timeout: .now() + 30)
    }

    /// The seqs of `feedsync events --json` lines, in order.
    static func seqs(_ lines: [String]) -> [Int64] {
        lines.compactMap { line in
            guard let data = line.data(using: .utf8), let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
                return nil
            }
            return (json["seq"] as? Int).map(Int64.init)
        }
    }

    /// The `feedsync` executable built next to the tests.
    static func cliExecutable() throws -> String {
        URL(fileURLWithPath: try benchExecutable()).deletingLastPathComponent().appendingPathComponent("feedsync").path
    }
}

extension Thread {
    /// Runs `body` on a new thread; the result is collected with ``DetachedResult/wait(seconds:)``.
    static func detachedResult<T: Sendable>(_ body: @escaping @Sendable () -> T) -> DetachedResult<T> {
        let result = DetachedResult<T>()
        Thread { result.finish(body()) }.start()
        return result
    }
}

/// The value of a body run on its own thread.
final class DetachedResult<T: Sendable>: Sendable {
    private let log = LockedLog<T>()

    fileprivate func finish(_ value: T) { log.append(value) }

    /// The value, once the body returned; `nil` after `seconds`.
    func wait(seconds: Double) -> T? {
        log.wait(seconds: seconds) { !$0.isEmpty } ? log.values.first : nil
    }
}
