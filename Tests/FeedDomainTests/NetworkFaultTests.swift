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

    // MARK: - Random faults under load

    /// Four writer processes, two followers (a `ChangeFeed` in this process, `feedsync events --follow`) and a
    /// transactional durable subscriber run through the proxy while it resets every connection or goes silent at
    /// random moments, and heals. Afterwards every acknowledged change is in the log, no follower delivered a seq
    /// twice or missed one, the subscriber applied each seq once, the followers survived and deliver a change made
    /// after the last heal, and the database passes `check`.
    ///
    /// `FEEDSYNC_NETWORK_FAULT_SEED` replays a schedule; `FEEDSYNC_NETWORK_FAULT_SECONDS` (default 20) sets its
    /// length.
    @Test func writersAndFollowersSurviveRandomResetsAndPartitions() throws {
        guard let network = try Network("net_random") else { return }
        let bench = try benchExecutable()
        let cli = try Self.cliExecutable()
        let seed =
            ProcessInfo.processInfo.environment["FEEDSYNC_NETWORK_FAULT_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1...999_999)
        let seconds = PostgresFaultTests.environmentInt("FEEDSYNC_NETWORK_FAULT_SECONDS", 20)
        let direct = try FeedService(location: network.direct)
        try direct.seed(SeedPlan(posts: 50, users: 20, likes: 0))
        let head = try direct.status().lastSeq

        var options = FeedOpenOptions()
        options.responseTimeout = .seconds(2)
        options.statementTimeout = .seconds(1)
        let service = try FeedService(location: network.proxiedUnderLoad, options: options)
        try direct.executeSQL("CREATE TABLE net_applied (n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, seq BIGINT NOT NULL)")
        let received = Recorder(service.bridge.changes)
        let feed = ChangeFeed(service: service)
        let feedErrors = Recorder(feed.errors)
        try feed.start()
        defer { feed.stop() }
        let subscriber = DurableSubscriber(
            name: "network", service: service, batchSize: 20,
            delivery: .transactional { event, tx in
                try tx.execute("INSERT INTO net_applied (seq) VALUES ($1)", [.integer(event.seq)])
            })
        let signals = Recorder(subscriber.signals)
        try subscriber.start()
        defer { subscriber.stop() }
        let follower = try Child(
            cli, ["--db", network.proxiedUnderLoad, "events", "--follow", "--json", "--since", String(head)],
            environment: ["FEEDSYNC_RESPONSE_TIMEOUT_MS": "2000"])
        defer { follower.kill() }
        let writers = try (1...4).map { k in
            try Child(
                bench,
                [
                    "agent-acks", "--db", network.proxiedUnderLoad, "--seed", String(k), "--users", "\(5 * k - 4)-\(5 * k)",
                    "--rate", "50", "--response-timeout", "2000",
                ])
        }
        defer { for writer in writers where writer.process.isRunning { writer.kill() } }

        let faults = LockedLog<String>()
        let problems = LockedLog<String>()
        let watchdog = Watchdog(stallTimeout: .seconds(40), limit: .seconds(Double(seconds) + 120))
        watchdog.spawn("faults") { worker in
            worker.step("waiting for every writer's first acknowledgement")
            for writer in writers where !writer.lines.wait(seconds: 30, until: { $0.contains { $0.hasPrefix("ack") } }) {
                problems.append("a writer acknowledged nothing before the faults: \(writer.lines.values.prefix(3))")
            }
            // `events --follow` has opened its database (a fault while it starts ends it with exit 75, as documented):
            // it printed an event committed after the writers began.
            worker.step("waiting for events --follow to print a change")
            if let ready = try? direct.toggle(userID: "user20", postID: "post50").seq,
                !follower.lines.wait(seconds: 60, until: { Self.seqs($0).contains(ready) })
            {
                problems.append("events --follow printed nothing before the faults: \(follower.lines.values.prefix(3))")
            }
            var random = FaultRandom(seed: seed)
            let end = ContinuousClock.now + .seconds(seconds)
            while ContinuousClock.now < end {
                if random.next(100) < 40 {
                    worker.step("reset #\(faults.values.count + 1)")
                    network.proxy.resetAll()
                    faults.append("reset")
                } else {
                    let millis = 500 + random.next(2500)
                    worker.step("partition #\(faults.values.count + 1) for \(millis) ms")
                    network.proxy.blackhole()
                    usleep(UInt32(millis) * 1000)  // the partition's length: the fault itself, not a wait for an event
                    network.proxy.heal()
                    faults.append("partition \(millis) ms")
                }
                usleep(UInt32(300 + random.next(1200)) * 1000)  // calm between faults
            }
        }
        if case .stalled(let report) = watchdog.waitForWorkers() {
            Watchdog.abandon([service, feed, received, feedErrors, subscriber, signals])
            Issue.record(Comment(rawValue: report))
            return
        }
        #expect(problems.values == [])

        // After the last heal: each writer acknowledges again, then stops.
        let healed = ContinuousClock.now
        for (index, writer) in writers.enumerated() {
            let mark = writer.lines.values.count
            let resumed = writer.lines.wait(seconds: 30) { lines in lines.dropFirst(mark).filter { $0.hasPrefix("ack") }.count >= 5 }
            #expect(resumed, "writer \(index + 1) acknowledged nothing after the heal: \(writer.lines.values.suffix(3))")
            #expect(writer.process.isRunning, "writer \(index + 1) survived")
            writer.kill()
        }
        let last = try #require(try direct.toggle(userID: "user1", postID: "post1").seq)
        let feedOK = received.wait(seconds: 30) { $0.contains { $0.seq == last } }
        let followerOK = follower.lines.wait(seconds: 30) { Self.seqs($0).contains(last) }
        let subscriberOK = signals.wait(seconds: 30) {
            $0.contains { if case .caughtUp(let seq) = $0 { seq >= last } else { false } }
        }
        let recovery = ContinuousClock.now - healed
        #expect(subscriberOK, "the durable subscriber never caught up to seq \(last): \(signals.values.suffix(3))")
        #expect(feedOK, "the change feed never delivered seq \(last); errors: \(feedErrors.values.suffix(3))")
        #expect(followerOK, "events --follow never printed seq \(last): \(follower.lines.values.suffix(3))")
        #expect(follower.process.isRunning, "events --follow survived")

        let log = try direct.events(after: head)
        let logSeqs = log.map(\.seq)
        #expect(
            ConcurrencyStressTests.logProblems(delivered: received.values.map(\.seq).filter { $0 > head }, log: logSeqs) == [], "bridge")
        #expect(ConcurrencyStressTests.logProblems(delivered: Self.seqs(follower.lines.values), log: logSeqs) == [], "events --follow")
        let applied = try direct.firstColumn("SELECT seq FROM net_applied ORDER BY n").compactMap { value -> Int64? in
            if case .integer(let seq) = value { seq } else { nil }
        }
        #expect(ConcurrencyStressTests.logProblems(delivered: applied.filter { $0 > head }, log: logSeqs) == [], "durable subscriber")
        let lines = writers.flatMap { $0.lines.values }
        let acks = lines.compactMap { Ack($0, slot: 1) }
        #expect(PostgresFaultTests.ackProblems(acks, log: log, service: direct) == [])
        let errors = lines.filter { $0.hasPrefix("error") }
        #expect(errors.allSatisfy { $0.hasPrefix("error busy ") }, "writer failures other than busy: \(Set(errors))")
        #expect(try direct.check().map(\.description) == [])
        try expectReplayMatchesLikes(direct, try direct.events(after: 0))
        let faultCounts = Dictionary(faults.values.map { ($0.hasPrefix("reset") ? "resets" : "partitions", 1) }, uniquingKeysWith: +)
        print(
            "NetworkFaultTests: seed \(seed), \(seconds) s of faults \(faultCounts); \(acks.count) acknowledged changes, "
                + "\(errors.count) failed commands (\(Set(errors.map { $0.split(separator: " ").last ?? "" }).sorted())), "
                + "\(log.count) events; both followers and the subscriber had the last change \(recovery) after the last heal "
                + "(feed errors \(feedErrors.values.count))")
    }

    // MARK: - Helpers

    /// Opens up to `connections` pooled connections by running that many reads at once.
    static func warm(_ service: FeedService, connections: Int) {
        DispatchQueue.concurrentPerform(iterations: connections) { _ in
            _ = try? service.feedPage(viewerID: "user1", limit: 20)
        }
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
