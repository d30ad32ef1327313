import FeedServer
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The event stream at scale and under its budgets: thousands of streams held by a few threads, each commit read from
/// the log once for all of them; a client address over its budget or a full stream budget refused with 503 while
/// everyone else is served; a stream that stops reading ended with `event: behind` and resumed from its last id; and
/// metrics that Prometheus reads, with no user or token in them.
// Blocks: waits for `feedsync serve` child processes and thousands of sockets polled on the test's thread, under a
// watchdog.
@Suite(.serialized, .ownThreads, .heavy) struct StreamBudgetTests {
    /// The users of the databases below; each has a post (`p1` is alice's, and so on).
    static let users = ["alice", "bob", "carol"]

    /// 2,000 streams on one server: all open with a handful of threads, each of 3 likes reaches every stream once and
    /// in order with one read of the log, bob's streams never show alice's id, and closing streams frees them at once.
    @Test func twoThousandStreamsShareOneLogReadPerCommit() throws {
        let count = 2_000
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < limit.rlim_max {
            limit.rlim_cur = limit.rlim_max
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        try #require(limit.rlim_cur >= rlim_t(count + 512), "the open-file limit \(limit.rlim_cur) is too low for \(count) streams")
        let (dir, database, tokens) = try Self.makeDatabase("feedsync-streams")
        let server = try ServeProcess(database: database, home: dir.path, extra: ["--max-connections-per-ip", "0"])
        defer { server.stop() }
        let pid = server.pid
        let watchdog = Watchdog("twoThousandStreams", limit: 150) { kill(pid, SIGKILL) }
        defer { watchdog.finish() }
        let head = try #require(try HTTPTestClient.request("GET", "/health", port: server.port).json["lastSeq"] as? Int)

        // Opened in batches of 100, each waited for: the server's queue of requests for its workers holds 1,024, and
        // libmicrohttpd's epoll loop (0.9.75 to 1.0) that drains exactly 128 ready connections calls epoll_wait again
        // with its full timeout before it handles them, so a burst of 128 new connections on one I/O thread of an
        // otherwise quiet server may wait there until the header timeout closes them unanswered.
        let herd = PolledStreams(port: server.port)
        let viewer = { (index: Int) in index % 2 == 0 ? "alice" : "bob" }
        let started = ContinuousClock.now
        while herd.streams.count < count {
            let batch = try herd.open(min(100, count - herd.streams.count), token: { tokens[viewer($0)] }, query: "?after=\(head)")
            let answered = herd.pump(timeout: 30) { herd in batch.allSatisfy { herd.streams[$0].status != nil || herd.streams[$0].ended } }
            let refused = batch.filter { herd.streams[$0].status != 200 }
            try #require(
                answered && refused.isEmpty,
                "streams \(batch) not all open after \(Self.format(Self.seconds(since: started))) s; refused: \(Self.summary(refused, in: herd)); server log: \(server.log)"
            )
        }
        let openSeconds = Self.seconds(since: started)
        let threads = try #require(ProcessFigures.threads(pid))
        let open = try MetricsPage.fetch(port: server.port)
        #expect(open.value("feedsync_http_streams") == Double(count))
        #expect((open.value("feedsync_http_connections") ?? 0) >= Double(count))
        #expect(threads < 64, "the server runs \(threads) threads for \(count) streams")

        // Three likes, one after another: each reaches all 2,000 streams before the next is sent.
        var seqs: [Int64] = []
        var deliveries: [Double] = []
        for post in ["p1", "p2", "p3"] {
            let sent = ContinuousClock.now
            let like = try HTTPTestClient.request("PUT", "/api/posts/\(post)/like", port: server.port, token: tokens["alice"])
            try #require(like.status == 200, "\(like.text)")
            let seq = try #require((like.json["seq"] as? NSNumber)?.int64Value, "\(like.text)")
            seqs.append(seq)
            let expected = seqs
            let reached = herd.pump(timeout: 30) { herd in herd.streams.allSatisfy { $0.seqs.count >= expected.count || $0.ended } }
            deliveries.append(Self.seconds(since: sent))
            let short = herd.streams.indices.filter { herd.streams[$0].seqs != expected }
            try #require(
                reached && short.isEmpty,
                "the like of \(post) (seq \(seq)); streams with other seqs: \(Self.summary(short, in: herd))"
            )
        }
        let liked = try MetricsPage.fetch(port: server.port)
        let logReads = (liked.value("feedsync_stream_log_reads_total") ?? .nan) - (open.value("feedsync_stream_log_reads_total") ?? .nan)
        let encoded = (liked.value("feedsync_stream_tail_events_total") ?? .nan) - (open.value("feedsync_stream_tail_events_total") ?? .nan)
        let written = (liked.value("feedsync_stream_events_total") ?? .nan) - (open.value("feedsync_stream_events_total") ?? .nan)
        #expect(logReads <= 3 && logReads >= 1, "\(logReads) reads of the log for 3 commits and \(count) streams")
        #expect(encoded == 3, "\(encoded) events encoded into the shared tail for 3 commits")
        #expect(written == Double(3 * count), "\(written) events written to the streams")
        let threadsAfterLikes = ProcessFigures.threads(pid) ?? .max
        #expect(threadsAfterLikes < 64, "the server runs \(threadsAfterLikes) threads after the likes")

        // Alice's streams show her likes as hers; bob's never carry her id, only the counts.
        #expect(herd.streams.allSatisfy { stream in stream.events.allSatisfy { $0.name == nil } })
        let aliceStreams = herd.streams.indices.filter { viewer($0) == "alice" }
        let bobStreams = herd.streams.indices.filter { viewer($0) == "bob" }
        #expect(aliceStreams.allSatisfy { index in herd.streams[index].events.allSatisfy { Self.isOwnLike($0.data, by: "alice") } })
        let leaks = bobStreams.filter { index in herd.streams[index].events.contains { $0.data.contains(#""userID":"alice""#) } }
        #expect(
            leaks.isEmpty,
            "bob's streams with alice's id: \(Self.summary(leaks, in: herd))")
        #expect(bobStreams.allSatisfy { index in herd.streams[index].events.allSatisfy { Self.isCountChange($0.data) } })

        // Half the clients go away: the server closes their streams at once, and the gauge follows.
        let hangUpStarted = ContinuousClock.now
        herd.hangUp(0..<(count / 2))
        let closedByServer = herd.pump(timeout: 5) { herd in herd.streams[0..<(count / 2)].allSatisfy(\.ended) }
        let half = try MetricsPage.wait(port: server.port, timeout: max(0.1, 5 - Self.seconds(since: hangUpStarted))) {
            $0.value("feedsync_http_streams") == Double(count / 2)
        }
        let halfSeconds = Self.seconds(since: hangUpStarted)
        #expect(closedByServer, "the server had not closed the streams whose clients went away after 5 s")
        #expect(half.value("feedsync_http_streams") == Double(count / 2), "after \(count / 2) clients went away")
        #expect(herd.streams[(count / 2)...].allSatisfy { $0.isOpen }, "a stream whose client stayed was closed")
        herd.close((count / 2)..<count)
        let none = try MetricsPage.wait(port: server.port, timeout: 5) { $0.value("feedsync_http_streams") == 0 }
        #expect(none.value("feedsync_http_streams") == 0, "after every client went away")
        #expect(server.stop() == 0, "\(server.log)")
        #expect(!watchdog.finish(), "the watchdog fired")
        print(
            "StreamBudgetTests: \(count) streams open in \(Self.format(openSeconds)) s; server threads \(threads) "
                + "(\(threadsAfterLikes) after the likes); likes delivered to all in \(deliveries.map(Self.format)) s; "
                + "\(Self.whole(logReads)) log reads, \(Self.whole(encoded)) events encoded, \(Self.whole(written)) written; "
                + "\(count / 2) streams closed in \(Self.format(halfSeconds)) s")
    }

    /// With `--max-connections-per-ip 20 --max-streams 30`: one address holding its 20 connections is refused a 21st
    /// while another is fully served; with every stream slot taken the next stream is refused while requests and other
    /// addresses are served; closing streams frees their slots. Bob's streams never show alice's id.
    @Test func fullBudgetsRefuseWith503WhileOthersAreServed() throws {
        let (dir, database, tokens) = try Self.makeDatabase("feedsync-lockout")
        let server = try ServeProcess(
            database: database, home: dir.path, extra: ["--max-connections-per-ip", "20", "--max-streams", "30"])
        defer { server.stop() }
        let pid = server.pid
        let watchdog = Watchdog("fullBudgets", limit: 90) { kill(pid, SIGKILL) }
        defer { watchdog.finish() }
        let port = server.port
        let (alice, bob) = (tokens["alice"], tokens["bob"])
        let head = try #require(try HTTPTestClient.request("GET", "/health", port: port).json["lastSeq"] as? Int)
        var likes = 0
        var refusals = ["address": 0, "streams": 0]

        // 127.0.0.2 holds its 20 connections with bob's streams; a 21st connection is refused at its request.
        let herd = PolledStreams(port: port)
        let crowd = try herd.open(20, token: { _ in bob }, query: "?after=\(head)", from: "127.0.0.2")
        try #require(herd.pump(timeout: 20) { herd in crowd.allSatisfy { herd.streams[$0].status != nil } })
        try #require(crowd.allSatisfy { herd.streams[$0].status == 200 }, "\(crowd.map { herd.streams[$0].status })")
        let lockedOutIndex = try herd.openOne(token: bob, query: "?after=\(head)", from: "127.0.0.2")
        let lockedOut = herd.streams[lockedOutIndex]
        Self.expectRefused(lockedOut, code: "tooManyConnections")
        refusals["address", default: 0] += 1
        #expect(lockedOut.headers["connection"]?.lowercased() == "close", "\(lockedOut.headers)")

        // 127.0.0.3 meanwhile: health, the feed, a like and a stream that receives it.
        let other = "127.0.0.3"
        #expect(try LoopbackClient.request("GET", "/health", port: port, from: other).status == 200)
        let feed = try LoopbackClient.request("GET", "/api/feed", port: port, from: other, token: alice)
        #expect(feed.status == 200 && (feed.json["posts"] as? [[String: Any]])?.count == 3, "\(feed.text)")
        let watcher = try herd.openOne(token: bob, query: "?after=\(head)", from: other)
        try #require(herd.streams[watcher].status == 200, "\(Self.describe(herd.streams[watcher]))")
        let first = try LoopbackClient.request("PUT", "/api/posts/p2/like", port: port, from: other, token: alice)
        #expect(first.status == 200, "\(first.text)")
        likes += 1
        let firstSeq = try #require((first.json["seq"] as? NSNumber)?.int64Value, "\(first.text)")
        #expect(herd.pump(timeout: 20) { $0.streams[watcher].seqs == [firstSeq] }, "\(herd.streams[watcher].seqs)")

        // 127.0.0.3 fills the stream budget (30) with alice's streams; the next stream is refused, for want of slots,
        // not of connections.
        let fillers = try herd.open(
            30 - herd.streams.filter(\.isOpen).count, token: { _ in alice }, query: "?after=\(firstSeq)", from: other)
        try #require(herd.pump(timeout: 20) { herd in fillers.allSatisfy { herd.streams[$0].status != nil } })
        try #require(fillers.allSatisfy { herd.streams[$0].status == 200 }, "\(fillers.map { herd.streams[$0].status })")
        let full = try herd.openOne(token: alice, query: "?after=\(firstSeq)", from: other)
        Self.expectRefused(herd.streams[full], code: "tooManyStreams")
        refusals["streams", default: 0] += 1

        // Requests still run, from any address, and every stream gets the like.
        let third = "127.0.0.4"
        #expect(try LoopbackClient.request("GET", "/health", port: port, from: third).status == 200)
        let second = try LoopbackClient.request("PUT", "/api/posts/p3/like", port: port, from: third, token: alice)
        #expect(second.status == 200, "\(second.text)")
        likes += 1
        let secondSeq = try #require((second.json["seq"] as? NSNumber)?.int64Value, "\(second.text)")
        let holding = Array(crowd) + [watcher] + Array(fillers)
        #expect(herd.pump(timeout: 20) { herd in holding.allSatisfy { herd.streams[$0].seqs.last == secondSeq } })
        #expect(fillers.allSatisfy { herd.streams[$0].seqs == [secondSeq] && Self.isOwnLike(herd.streams[$0].events[0].data, by: "alice") })
        for index in Array(crowd) + [watcher] {
            #expect(herd.streams[index].events.allSatisfy { !$0.data.contains(#""userID":"alice""#) && Self.isCountChange($0.data) })
        }

        // Two of 127.0.0.2's clients go away: their slots take a stream from 127.0.0.4, then one from 127.0.0.2
        // itself, and the budget is full again.
        herd.hangUp(crowd.prefix(2))
        #expect(herd.pump(timeout: 5) { herd in crowd.prefix(2).allSatisfy { herd.streams[$0].ended } })
        for source in [third, "127.0.0.2"] {
            let index = try Self.openRetryingWhileRefused(
                herd, token: bob, query: "?after=\(secondSeq)", from: source, within: 5, refusals: &refusals)
            #expect(herd.streams[index].status == 200, "a stream from \(source): \(Self.describe(herd.streams[index]))")
        }
        let fullAgain = try herd.openOne(token: bob, query: "?after=\(secondSeq)", from: "127.0.0.2")
        Self.expectRefused(herd.streams[fullAgain], code: "tooManyStreams")
        refusals["streams", default: 0] += 1

        let metrics = try MetricsPage.fetch(port: port)
        #expect(metrics.value("feedsync_http_streams") == 30)
        #expect(metrics.value(#"feedsync_http_requests_total{route="like",status="200"}"#) == Double(likes))
        for (reason, count) in refusals {
            #expect(metrics.value(#"feedsync_http_rejected_total{reason="\#(reason)"}"#) == Double(count), "refusals for \(reason)")
        }
        try metrics.checkWithPromtool()
        herd.close(herd.streams.indices)
        #expect(server.stop() == 0, "\(server.log)")
        #expect(!watchdog.finish(), "the watchdog fired")
    }

    /// A stream whose client stops reading falls behind the shared tail (16 events here) and ends with `event: behind`
    /// naming the last id it got, after a gapless prefix; a new stream from that id gets every later seq once, in order,
    /// read from the log.
    @Test func aStreamThatStopsReadingEndsBehindAndResumesFromItsLastID() throws {
        guard let sut = try ServerFixture(on: .sqlite, configure: { $0.tailCapacity = 16 }) else { return }
        defer { sut.close() }
        let watchdog = Watchdog("aStreamThatStopsReading", limit: 120)
        defer { watchdog.finish() }
        let herd = PolledStreams(port: sut.port)
        let slow = try herd.openOne(token: "tok-bob", query: "?after=6", receiveBuffer: 4096)
        try #require(herd.streams[slow].status == 200, "\(Self.describe(herd.streams[slow]))")

        // Live first: the stream copies seq 7 from the tail. (A stream that never read from the tail catches up from
        // the log instead, whatever its lag.)
        var last = try #require(try sut.service.toggle(userID: "alice", postID: "p1").seq)
        try #require(herd.pump(timeout: 20) { $0.streams[slow].seqs == [7] }, "\(Self.describe(herd.streams[slow]))")
        let copiedLive = try #require(try MetricsPage.fetch(port: sut.port).value("feedsync_stream_events_total"))

        // Toggles while nothing is read, until the server's own figures show that the stream cannot catch up from the
        // tail: the fan-out's last seq is more than the tail plus one read's frames (a 4 KiB buffer holds about 30)
        // past the stream's cursor, which is 7 plus the events copied to it since (the only stream open). Once the
        // socket buffers are full (a few MB on loopback) the copies stop; a reader that lags behind fast commits gets
        // there sooner.
        var toggles = 0
        var lag: Int64 = 0
        while lag <= 64, toggles < 60_000 {
            for index in toggles..<(toggles + 100) {
                let result = try sut.service.toggle(userID: Self.users[index % 3], postID: "p\(index % 3 + 1)")
                last = try #require(result.seq)
            }
            toggles += 100
            let figures = try MetricsPage.fetch(port: sut.port)
            let copied = try #require(figures.value("feedsync_stream_events_total"), "\(figures.text)")
            let head = try #require(figures.value("feedsync_last_seq"), "\(figures.text)")
            lag = Int64(head) - 7 - Int64(copied - copiedLive)
        }
        try #require(lag > 64, "the stream kept up with \(toggles) toggles")

        // Reading again: what the buffers held, then the end.
        #expect(herd.pump(timeout: 30) { $0.streams[slow].ended }, "the stream did not end: \(Self.describe(herd.streams[slow]))")
        let stream = herd.streams[slow]
        let received = stream.seqs
        let lastID = try #require(received.last, "the stream got no event before it fell behind")
        #expect(received == Array(7...lastID), "a gap or a repeat among \(received.count) events")
        #expect(stream.events.dropLast().allSatisfy { $0.name == nil })
        #expect(stream.events.last == PolledStreams.Event(id: nil, name: "behind", data: #"{"lastEventID":\#(lastID)}"#))
        #expect(stream.failure == nil && stream.bodyFinished, "the stream did not end cleanly: \(Self.describe(stream))")
        #expect(lastID < last)
        #expect(stream.events.allSatisfy { !$0.data.contains(#""userID":"alice""#) && !$0.data.contains(#""userID":"carol""#) })

        // Resumed from its last id: the rest, from the log, then live.
        let readsBefore = try MetricsPage.fetch(port: sut.port).value("feedsync_stream_catch_up_reads_total") ?? .nan
        let resumed = try herd.openOne(token: "tok-bob", lastEventID: lastID)
        let caughtUp = herd.pump(timeout: 30) { $0.streams[resumed].ended || ($0.streams[resumed].seqs.last ?? 0) >= last }
        #expect(caughtUp, "the resumed stream: \(Self.describe(herd.streams[resumed]))")
        #expect(herd.streams[resumed].seqs == Array((lastID + 1)...last), "the resumed stream has a gap or a repeat")
        #expect(herd.streams[resumed].events.allSatisfy { $0.name == nil })
        let liked = try sut.service.toggle(userID: "bob", postID: "p1")
        #expect(herd.pump(timeout: 20) { $0.streams[resumed].seqs.last == liked.seq }, "the resumed stream did not go live")
        let metrics = try MetricsPage.fetch(port: sut.port)
        #expect((metrics.value("feedsync_stream_catch_up_reads_total") ?? .nan) > readsBefore)
        #expect(metrics.value("feedsync_stream_behind_total") == 1)
        #expect(!watchdog.finish(), "the watchdog fired")
        print(
            "StreamBudgetTests: a stream that stopped reading was \(lag) events behind after \(toggles) toggles; it got \(received.count) "
                + "events, then event: behind at seq \(lastID) of \(last); resumed with \(last - lastID) events from the log")
    }

    /// `/metrics` after some traffic is valid Prometheus text (`promtool check metrics`), has the stream and request
    /// families, counts the likes exactly, and carries no user id, token or path: every label is from a fixed set.
    @Test func metricsAreValidPrometheusTextWithoutUsersOrTokens() throws {
        guard let sut = try ServerFixture(on: .sqlite, configure: { $0.maximumStreams = 2 }) else { return }
        defer { sut.close() }
        let herd = PolledStreams(port: sut.port)
        let streams = try herd.open(2, token: { _ in "tok-bob" }, query: "?after=6")
        try #require(herd.pump(timeout: 20) { herd in streams.allSatisfy { herd.streams[$0].status != nil } })
        try #require(streams.allSatisfy { herd.streams[$0].status == 200 })
        let refused = try herd.openOne(token: "tok-alice", query: "?after=6")
        Self.expectRefused(herd.streams[refused], code: "tooManyStreams")
        var last: Int64 = 0
        for post in ["p1", "p2", "p3"] {
            let like = try sut.request("PUT", "/api/posts/\(post)/like", token: "tok-alice")
            #expect(like.status == 200, "\(like.text)")
            last = (like.json["seq"] as? NSNumber)?.int64Value ?? last
        }
        #expect(try sut.request("DELETE", "/api/posts/p1/like", token: "tok-alice").status == 200)
        #expect(try sut.request("PUT", "/api/posts/p2/like").status == 401)
        #expect(try sut.request("PUT", "/api/posts/p2/like", token: "tok-gone").status == 401)
        #expect(try sut.request("GET", "/api/posts/nope-\(UUID().uuidString)", token: "tok-carol").status == 404)
        #expect(herd.pump(timeout: 20) { herd in streams.allSatisfy { herd.streams[$0].seqs.count == 4 } })

        // The gauge of the last seq moves just after the streams could copy the event: waited for, bounded.
        let page = try MetricsPage.wait(port: sut.port, timeout: 5) { $0.value("feedsync_last_seq") == Double(last + 1) }
        try page.checkWithPromtool()
        for family in [
            "feedsync_http_streams", "feedsync_http_connections", "feedsync_stream_log_reads_total", "feedsync_stream_tail_events_total",
            "feedsync_http_requests_total", "feedsync_http_request_duration_seconds", "feedsync_stream_delivery_seconds",
            "process_resident_memory_bytes", "process_threads", "process_open_fds",
        ] {
            #expect(page.text.contains("\n# TYPE \(family) ") || page.text.hasPrefix("# HELP \(family) "), "no family \(family)")
        }
        #expect(page.value(#"feedsync_http_requests_total{route="like",status="200"}"#) == 3)
        #expect(page.value(#"feedsync_http_requests_total{route="unlike",status="200"}"#) == 1)
        #expect(page.value(#"feedsync_http_requests_total{route="like",status="401"}"#) == 2)
        #expect(page.value(#"feedsync_http_requests_total{route="events",status="503"}"#) == 1)
        #expect(page.value("feedsync_http_streams") == 2)
        #expect(page.value("feedsync_last_seq") == Double(last + 1))
        for secret in Self.users + Array(ServerFixture.tokens.keys) + ["tok-", "userID", "Bearer", "nope-"] {
            #expect(!page.text.contains(secret), "/metrics contains \(secret)")
        }
        let routes: Set = [
            "page", "health", "feed", "createPost", "post", "like", "unlike", "events", "syncPush", "syncPull", "demoTokens", "metrics",
            "unknown",
        ]
        for labels in page.labelSets {
            #expect(Set(labels.keys).isSubset(of: ["route", "status", "reason", "le"]), "labels \(labels)")
            if let route = labels["route"] { #expect(routes.contains(route), "route label \(route)") }
            if let status = labels["status"] { #expect(Int(status).map { (100...599).contains($0) } == true, "status label \(status)") }
            if let reason = labels["reason"] {
                #expect(["workers", "address", "streams", "stopping"].contains(reason), "reason \(reason)")
            }
        }
    }

    // MARK: - Helpers

    /// A SQLite database with alice, bob and carol, a post each, and a token each from `feedsync token issue`.
    private static func makeDatabase(_ name: String) throws -> (TemporaryDirectory, String, [String: String]) {
        let dir = TemporaryDirectory(name)
        let database = dir.file("feed.sqlite")
        let setup = try FeedService(location: database)
        for user in users { try setup.createUser(id: user) }
        for (index, user) in users.enumerated() { try setup.createPost(id: "p\(index + 1)", authorID: user, body: "post by \(user)") }
        setup.close()
        var tokens: [String: String] = [:]
        for user in users {
            let issued = try ChildProcess.run(["--db", database, "token", "issue", "--user", user], home: dir.path)
            try #require(issued.status == 0, "\(issued.stderr)")
            tokens[user] = issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        return (dir, database, tokens)
    }

    /// Opens one stream from `source`, again while it is refused with 503 for a budget (`refusals` counts each by its
    /// metric's reason), for at most `within` seconds; returns its index. A closed stream's slot is freed just after
    /// the server closed its socket, and its connection leaves the address's count when libmicrohttpd has cleaned it up,
    /// a moment later still.
    private static func openRetryingWhileRefused(
        _ herd: PolledStreams, token: String?, query: String, from source: String, within: Double, refusals: inout [String: Int]
    ) throws -> Int {
        let deadline = ContinuousClock.now + .seconds(within)
        let reasons = ["tooManyStreams": "streams", "tooManyConnections": "address"]
        while true {
            let index = try herd.openOne(token: token, query: query, from: source)
            let stream = herd.streams[index]
            guard stream.status == 503, let reason = (stream.response?.json["code"] as? String).flatMap({ reasons[$0] }) else {
                return index
            }
            refusals[reason, default: 0] += 1
            if ContinuousClock.now >= deadline { return index }
        }
    }

    /// A stream refused with 503, `Retry-After` and the JSON error `code`, its answer read to its end.
    private static func expectRefused(_ stream: PolledStreams.Stream, code: String, sourceLocation: SourceLocation = #_sourceLocation) {
        guard let answer = stream.response, stream.ended else {
            Issue.record("the stream was not refused: \(describe(stream))", sourceLocation: sourceLocation)
            return
        }
        expectRefused(answer, code: code, sourceLocation: sourceLocation)
    }

    /// A 503 with `Retry-After` and the JSON error `code`.
    private static func expectRefused(_ answer: HTTPTestResponse, code: String, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(answer.status == 503, "\(answer.status) \(answer.text)", sourceLocation: sourceLocation)
        #expect(answer.json["code"] as? String == code, "\(answer.text)", sourceLocation: sourceLocation)
        #expect(Int(answer.headers["retry-after"] ?? "").map { $0 > 0 } == true, "\(answer.headers)", sourceLocation: sourceLocation)
    }

    /// A like or unlike as its own user sees it.
    private static func isOwnLike(_ data: String, by user: String) -> Bool {
        data.contains(#""kind":"liked""#) && data.contains(#""userID":"\#(user)""#)
    }

    /// Another user's like or unlike: a changed count, without the user.
    private static func isCountChange(_ data: String) -> Bool {
        data.contains(#""kind":"likeCountChanged""#) && data.contains(#""userID":"""#)
    }

    private static func describe(_ stream: PolledStreams.Stream) -> String {
        let body = String(decoding: stream.body.prefix(200), as: UTF8.self)
        return "status \(stream.status.map(String.init) ?? "none"), \(stream.seqs.count) seqs (last \(stream.seqs.last ?? 0)), "
            + "request sent \(stream.requestSent), ended \(stream.ended), failure \(stream.failure ?? "none"), last event \(stream.events.last.map { String($0.data.prefix(120)) } ?? "none") \(body)"
    }

    private static func seconds(since start: ContinuousClock.Instant) -> Double {
        (ContinuousClock.now - start) / .seconds(1)
    }

    private static func format(_ seconds: Double) -> String { String(format: "%.2f", seconds) }

    private static func whole(_ value: Double) -> String { value.isFinite ? String(Int(value)) : "?" }

    /// How many of `indices` there are, and the first one described.
    private static func summary(_ indices: [Int], in herd: PolledStreams) -> String {
        "\(indices.count), first \(indices.first.map { describe(herd.streams[$0]) } ?? "-")"
    }
}
