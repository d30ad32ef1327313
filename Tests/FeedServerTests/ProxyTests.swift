import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Several `feedsync serve` instances behind a real nginx: two instances on one PostgreSQL database, and nginx running
/// the configuration of `Docs/HTTP.md`'s Deployment section (TLS, round robin, no buffering for the event stream).
///
/// A like through nginx reaches streams held on either instance and through nginx within a second; a stream resumed
/// with `Last-Event-ID` on the other instance gets exactly the events it had not seen; nginx spreads requests over
/// both instances and keeps serving likes and streams when one stops; `/metrics` is refused. Without nginx, curl or
/// openssl, or without the PostgreSQL test server, the tests are skipped with a notice, except under `CI=true`,
/// where they fail.
// Blocks: waits for two `feedsync serve` child processes, nginx and curl, under a watchdog.
@Suite(.ownThreads, .heavy) struct ProxyTests {
    /// Streams held directly on A, directly on B and through nginx each get every like sent through nginx, within a
    /// second of its sending; `/metrics` is refused through nginx.
    @Test func aLikeThroughNginxReachesStreamsOnBothInstancesWithinASecond() throws {
        guard let sut = try ProxiedDeployment.make("proxy_fanout") else { return }
        defer { sut.finish() }
        let health = try Curl.request("GET", "/health", proxy: sut.nginx)
        #expect(health.status == 200, "\(health.text)")
        let start = try #require(health.json["lastSeq"] as? Int)
        let streams = [
            try sut.stream(on: sut.serverA.port, token: sut.alice, query: "?after=\(start)"),
            try sut.stream(on: sut.serverB.port, token: sut.bob, query: "?after=\(start)"),
            try sut.stream(token: sut.alice, query: "?after=\(start)"),
        ]
        let names = ["on A", "on B", "through nginx"]
        for (stream, name) in zip(streams, names) { try Self.requireOpen(stream, name) }
        // The stream needs a token: the one through nginx got its `Authorization` header.
        let anonymous = try Curl.request("GET", "/api/events?after=\(start)", proxy: sut.nginx)
        #expect(anonymous.status == 401, "\(anonymous.status) \(anonymous.text)")

        var seqs: [Int64] = []
        let likes = [(sut.alice, "p1", 1), (sut.bob, "p2", 1), (sut.bob, "p1", 2)]
        // Each like's curl starts ahead (while the previous like is awaited): the time measured is the request's.
        var pending = try sut.prepareLike(likes[0].1, as: likes[0].0)
        for (index, (_, post, count)) in likes.enumerated() {
            let sent = ContinuousClock.now
            let like = try sut.like(pending)
            let answered = ContinuousClock.now
            if index + 1 < likes.count { pending = try sut.prepareLike(likes[index + 1].1, as: likes[index + 1].0) }
            seqs.append(like.seq)
            #expect(like.likeCount == count, "the like of \(post)")
            let arrivals = zip(streams, names).compactMap { stream, name in
                let arrived = stream.wait { $0.seqs.contains(like.seq) }
                #expect(arrived, "the stream \(name) has \(stream.seqs), not \(like.seq)")
                return stream.snapshot.events.first { $0.id?.hasPrefix("\(like.seq).") == true }?.arrived
            }
            try #require(arrivals.count == streams.count, "the like of \(post) (seq \(like.seq)) reached only some streams")
            let last = try #require(arrivals.max())
            // From the like's commit (the event's `at`, stamped by the instance that ran it) to its arrival on the last
            // of the three streams: the time the like takes to reach every stream, whatever the machine's load made
            // the request itself take.
            let events = streams.compactMap { $0.snapshot.events.first { $0.id?.hasPrefix("\(like.seq).") == true } }
            let committed = try #require(events.first.flatMap { Self.committedAt($0.data) }, "the event has no at")
            let lastArrival = try #require(events.map(\.arrivedAt).max())
            let reach = lastArrival.timeIntervalSince(committed)
            print(
                "ProxyTests: the like of \(post) (seq \(like.seq)) sent through nginx reached all three streams "
                    + "\(Int(reach * 1000)) ms after its commit, \(milliseconds(last - sent)) ms after it was sent; its answer "
                    + "came in \(milliseconds(answered - sent)) ms")
            #expect(events.count == streams.count)
            #expect(reach <= 1, "the like of \(post) reached all three streams \(Int(reach * 1000)) ms after its commit")
        }
        for (stream, name) in zip(streams, names) {
            #expect(stream.seqs == seqs, "the stream \(name), each like once and in order")
        }
        // Whoever the viewer, an event names its post and the post's new count.
        let events = streams[2].snapshot.events
        #expect(events.first?.data.contains(#""postID":"p1""#) == true && events.first?.data.contains(#""likeCount":1"#) == true)
        #expect(events.last?.data.contains(#""postID":"p1""#) == true && events.last?.data.contains(#""likeCount":2"#) == true)

        // An instance answers `/metrics` to loopback, where every request through nginx comes from: nginx refuses it.
        let direct = try Curl.request("GET", "/metrics", port: sut.serverA.port)
        #expect(direct.status == 200 && direct.text.contains("feedsync_"), "\(direct.status) \(direct.text.prefix(200))")
        let metrics = try Curl.request("GET", "/metrics", proxy: sut.nginx)
        #expect(metrics.status == 403, "\(metrics.status) \(metrics.text)")
        #expect(sut.stopServers())
    }

    /// A stream through nginx reads some events and is closed; after more likes, one resumed with `Last-Event-ID`
    /// directly on the other instance, and one resumed through nginx, each get exactly the seqs after the last it
    /// read: each once, in order, none missing.
    @Test func aStreamResumedOnTheOtherInstanceMissesNothing() throws {
        guard let sut = try ProxiedDeployment.make("proxy_resume") else { return }
        defer { sut.finish() }
        let start = try #require(try Curl.request("GET", "/health", proxy: sut.nginx).json["lastSeq"] as? Int)
        let first = try sut.stream(token: sut.alice, query: "?after=\(start)")
        try Self.requireOpen(first, "through nginx")
        let served = try #require(ProxiedDeployment.upstreamPorts(first.snapshot.headers).last, "\(first.snapshot.headers)")
        let other = try #require([sut.serverA, sut.serverB].first { $0.port != served }, "\(served) is neither instance")

        var seqs: [Int64] = []
        for (token, post) in [(sut.alice, "p1"), (sut.alice, "p2"), (sut.bob, "p1")] { seqs.append(try sut.like(post, as: token).seq) }
        #expect(first.wait { $0.seqs.count >= 3 } && first.seqs == seqs, "\(first.seqs)")
        let recorded = try #require(first.seqs.last)
        first.close()
        #expect(first.wait { $0.ended })

        let more: [(String, String, String)] = [
            ("PUT", sut.bob, "p2"), ("PUT", sut.alice, "p3"), ("DELETE", sut.alice, "p1"), ("PUT", sut.bob, "p3"),
            ("PUT", sut.alice, "p4"),
        ]
        var missed: [Int64] = []
        for (method, token, post) in more { missed.append(try sut.like(post, as: token, method: method).seq) }
        let resumed = [
            try sut.stream(on: other.port, token: sut.bob, lastEventID: recorded),
            try sut.stream(token: sut.alice, lastEventID: recorded),
        ]
        let names = ["directly on the other instance (\(other.port), the first was on \(served))", "through nginx"]
        // One more like after both resumed: it arrives live, and everything before it is in place by then.
        missed.append(try sut.like("p5", as: sut.bob).seq)
        for (stream, name) in zip(resumed, names) {
            #expect(stream.wait { $0.seqs.contains(missed.last!) }, "the stream resumed \(name): \(stream.seqs) \(stream.curlErrors)")
            #expect(stream.snapshot.status == 200 && stream.seqs == missed, "the stream resumed \(name) after \(recorded): \(stream.seqs)")
        }
        #expect(sut.stopServers())
    }

    /// nginx spreads likes over both instances (each answer 200 with its seq); with one instance stopped it sends
    /// every like and every new stream to the other, and nothing committed is missed.
    @Test func nginxSpreadsRequestsAndKeepsServingWhenAnInstanceStops() throws {
        guard let sut = try ProxiedDeployment.make("proxy_failover") else { return }
        defer { sut.finish() }
        let start = try #require(try Curl.request("GET", "/health", proxy: sut.nginx).json["lastSeq"] as? Int)
        let onB = try sut.stream(on: sut.serverB.port, token: sut.bob, query: "?after=\(start)")
        try Self.requireOpen(onB, "on B")

        var seqs: [Int64] = []
        var answeredBy: Set<UInt16> = []
        for (token, post) in [(sut.alice, "p1"), (sut.alice, "p2"), (sut.bob, "p1"), (sut.bob, "p2")] {
            let like = try sut.like(post, as: token)
            seqs.append(like.seq)
            #expect(like.upstreams.count == 1, "with both up, the first instance tried answers: \(like.upstreams)")
            if let last = like.upstreams.last { answeredBy.insert(last) }
        }
        #expect(answeredBy == [sut.serverA.port, sut.serverB.port], "round robin over both instances: \(answeredBy)")

        #expect(sut.serverA.stop() == 0, "\(sut.serverA.log)")
        for (token, post) in [(sut.alice, "p3"), (sut.bob, "p3"), (sut.alice, "p4"), (sut.bob, "p4")] {
            let like = try sut.like(post, as: token)
            seqs.append(like.seq)
            #expect(like.upstreams.last == sut.serverB.port, "with A stopped, B answers: \(like.upstreams)")
        }
        #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "\(seqs)")

        let fresh = try sut.stream(token: sut.alice, query: "?after=\(start)")
        try Self.requireOpen(fresh, "through nginx with A stopped")
        #expect(ProxiedDeployment.upstreamPorts(fresh.snapshot.headers).last == sut.serverB.port)
        seqs.append(try sut.like("p5", as: sut.alice).seq)
        for (stream, name) in [(onB, "on B"), (fresh, "through nginx, opened with A stopped")] {
            #expect(stream.wait { $0.seqs.count >= seqs.count }, "the stream \(name): \(stream.seqs)")
            #expect(stream.seqs == seqs, "the stream \(name)")
        }
        #expect(sut.stopServers())
    }

    /// Requires `stream`'s answer to have come with status 200: nothing after it means anything otherwise.
    private static func requireOpen(_ stream: CurlEventStream, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let opened = stream.wait { $0.status != nil || $0.ended }
        let status = stream.snapshot.status
        try #require(
            opened && status == 200, "the stream \(name): status \(status.map(String.init) ?? "none") \(stream.curlErrors)",
            sourceLocation: sourceLocation)
    }
}

/// One test's deployment: a fresh PostgreSQL database with users alice, bob and carol and carol's posts p1…p5, a
/// token each for alice and bob, two `feedsync serve` instances on it and nginx in front of both; a watchdog kills
/// every child process if the test runs past its limit, so that each wait ends at once and the test fails.
private final class ProxiedDeployment: Sendable {
    let directory: TemporaryDirectory
    let serverA: ServeProcess
    let serverB: ServeProcess
    let nginx: NginxProxy
    let alice: String
    let bob: String
    private let streams = LockedValue<[CurlEventStream]>([])
    private let ended = DispatchSemaphore(value: 0)
    private let fired = LockedValue(false)

    /// Behind a proxy every connection comes from the proxy's address: `serve`'s per-address budget is off, and nginx
    /// holds the per-client one (`limit_conn`).
    static let perAddressBudgetOff = ["--max-connections-per-ip", "0"]

    /// Printed once per process when the tests are skipped for want of nginx, curl or openssl.
    private static let skipNotice: Void = {
        print("ProxyTests: skipped, no nginx, curl or openssl (apt install nginx curl openssl)")
    }()

    /// The deployment, or `nil` (after a notice) when nginx, curl, openssl or the PostgreSQL test server is missing;
    /// under `CI=true` a missing one fails the test instead.
    static func make(_ label: String, limit: Double = 180) throws -> ProxiedDeployment? {
        let missing = [
            (NginxProxy.executable, "nginx"), (Curl.executable, "curl"), ("/usr/bin/openssl", "openssl"),
        ]
        .filter { !FileManager.default.isExecutableFile(atPath: $0.0) }.map(\.1)
        guard missing.isEmpty else {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                Issue.record("\(missing.joined(separator: ", ")) missing: CI installs them (.ci/run), so the proxy tests must run")
            } else {
                _ = skipNotice
            }
            return nil
        }
        let directory = TemporaryDirectory("feedsync-proxy")
        guard let database = try PostgresTestDatabase.make(label) else { return nil }
        directory.onRelease { database.drop() }
        let setup = try FeedService(location: database.url)
        for user in ["alice", "bob", "carol"] { try setup.createUser(id: user) }
        for post in 1...5 { try setup.createPost(id: "p\(post)", authorID: "carol", body: "post \(post)") }
        setup.close()
        let tokens = try ["alice", "bob"].map { user in
            let issued = try ChildProcess.run(["--db", database.url, "token", "issue", "--user", user], home: directory.path)
            guard issued.status == 0 else { throw ServeError(description: "token issue: \(issued.stderr)") }
            return issued.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        let serverA = try ServeProcess(database: database.url, home: directory.path, extra: perAddressBudgetOff)
        let serverB = try ServeProcess(database: database.url, home: directory.path, extra: perAddressBudgetOff)
        let nginx = try NginxProxy(upstreams: [serverA.port, serverB.port], directory: directory)
        return ProxiedDeployment(
            directory: directory, serverA: serverA, serverB: serverB, nginx: nginx, tokens: tokens, limit: limit)
    }

    private init(
        directory: TemporaryDirectory, serverA: ServeProcess, serverB: ServeProcess, nginx: NginxProxy, tokens: [String],
        limit: Double
    ) {
        (self.directory, self.serverA, self.serverB, self.nginx) = (directory, serverA, serverB, nginx)
        (alice, bob) = (tokens[0], tokens[1])
        let (ended, fired, streams) = (ended, fired, streams)
        let pids = [serverA.pid, serverB.pid]
        let watchdog = Thread {
            guard ended.wait(timeout: .now() + limit) == .timedOut else { return }
            print("ProxyTests: the watchdog fired after \(limit) s: killing nginx, curl and both instances")
            fired.withLock { $0 = true }
            nginx.kill()
            for stream in streams.withLock({ $0 }) { stream.kill() }
            for pid in pids { kill(pid, SIGKILL) }
        }
        watchdog.name = "proxy-watchdog"
        watchdog.start()
    }

    /// A stream of `/api/events` directly to the instance on `port`, or through nginx without one; closed by
    /// ``finish()``.
    func stream(on port: UInt16? = nil, token: String, query: String = "", lastEventID: Int64? = nil) throws -> CurlEventStream {
        let stream = try CurlEventStream(
            proxy: port == nil ? nginx : nil, port: port, token: token, query: query, lastEventID: lastEventID)
        streams.withLock { $0.append(stream) }
        return stream
    }

    /// Likes (or with `DELETE` unlikes) `post` through nginx; expects 200 with a seq and a change. Returns the seq,
    /// the new count and the ports of the instances nginx tried, the one that answered last.
    func like(
        _ post: String, as token: String, method: String = "PUT", sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> (seq: Int64, likeCount: Int, upstreams: [UInt16]) {
        try like(prepareLike(post, as: token, method: method), sourceLocation: sourceLocation)
    }

    /// A like (or an unlike) through nginx with its curl started, for ``like(_:sourceLocation:)``.
    func prepareLike(_ post: String, as token: String, method: String = "PUT") throws -> Curl.PendingRequest {
        try Curl.PendingRequest(method, "/api/posts/\(post)/like", proxy: nginx, token: token)
    }

    /// Sends a prepared like and checks it as ``like(_:as:method:sourceLocation:)`` does.
    func like(
        _ request: Curl.PendingRequest, sourceLocation: SourceLocation = #_sourceLocation
    ) throws
        -> (seq: Int64, likeCount: Int, upstreams: [UInt16])
    {
        let answer = try request.send()
        #expect(answer.status == 200, "\(request.label): \(answer.status) \(answer.text)", sourceLocation: sourceLocation)
        #expect(answer.json["changed"] as? Bool == true, "\(answer.text)", sourceLocation: sourceLocation)
        let seq = try #require((answer.json["seq"] as? NSNumber)?.int64Value, "\(answer.text)", sourceLocation: sourceLocation)
        let upstreams = Self.upstreamPorts(answer.headers)
        #expect(!upstreams.isEmpty, "nginx named no instance: \(answer.headers)", sourceLocation: sourceLocation)
        return (seq, answer.json["likeCount"] as? Int ?? -1, upstreams)
    }

    /// The ports of `X-Test-Upstream` (nginx's `$upstream_addr`: `127.0.0.1:PORT`, a comma between the instances
    /// tried), in the order nginx tried them.
    static func upstreamPorts(_ headers: [String: String]) -> [UInt16] {
        (headers[NginxProxy.upstreamHeader] ?? "").split(separator: ",").compactMap { address in
            address.split(separator: ":").last.flatMap { UInt16($0.trimmingCharacters(in: .whitespaces)) }
        }
    }

    /// Stops both instances (SIGINT) unless stopped already; returns whether each exited with status 0.
    func stopServers() -> Bool {
        var clean = true
        for server in [serverA, serverB] {
            let status = server.stop()
            if status != 0 {
                print("ProxyTests: an instance exited with \(status.map(String.init) ?? "no status"): \(server.log)")
                clean = false
            }
        }
        return clean
    }

    /// Closes every stream, stops nginx and both instances and ends the watchdog; a watchdog that fired fails the test.
    func finish(sourceLocation: SourceLocation = #_sourceLocation) {
        for stream in streams.withLock({ $0 }) { stream.close() }
        let status = nginx.stop()
        #expect(status == 0, "nginx stopped with \(status.map(String.init) ?? "no status"): \(nginx.log)", sourceLocation: sourceLocation)
        _ = stopServers()
        ended.signal()
        #expect(!fired.withLock { $0 }, "the watchdog fired: nginx log \(nginx.log)", sourceLocation: sourceLocation)
    }
}

private func milliseconds(_ duration: Duration) -> Int {
    Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
}

extension ProxyTests {
    /// The `at` of an event's JSON data (ISO 8601 with milliseconds).
    static func committedAt(_ data: String) -> Date? {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(data.utf8))) as? [String: Any],
            let text = object["at"] as? String
        else { return nil }
        return try? Date(text, strategy: .iso8601.year().month().day().time(includingFractionalSeconds: true))
    }
}
