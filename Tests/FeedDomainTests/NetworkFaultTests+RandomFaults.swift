import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Writers, followers and a durable subscriber through random resets and partitions.
extension NetworkFaultTests {
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
            environment: ["FEEDSYNC_RESPONSE_TIMEOUT_MS": "2000", "FEEDSYNC_LOG": "info"], capturingErrors: true)
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
        #expect(
            followerOK,
            "events --follow never printed seq \(last): \(follower.lines.values.suffix(3)); its log: \(follower.errorLines.values.suffix(20))"
        )
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
                + "(feed errors \(feedErrors.values.count); events --follow logged \(follower.errorLines.values.count) lines)")
    }
}
