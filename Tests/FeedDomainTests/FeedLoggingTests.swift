import FeedSync
import FeedCore
@testable import FeedDomain
import FeedPublishers
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// The logger hook: what it receives, and that it never receives a secret.
@Suite struct FeedLoggingTests {
    @Test(arguments: TestBackend.allCases) func aDurableSubscriberRetryingAFailedPassIsLogged(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let logged = AsyncLog<FeedLogEvent>()
        let service = try makeService(at: location, logger: { logged.append($0) })
        defer { service.close() }
        struct Unreachable: Error, CustomStringConvertible {
            var description: String { "the mail server is unreachable" }
        }
        let failures = Box(1)
        let subscriber = DurableSubscriber(
            name: "mailer", service: service,
            delivery: .atLeastOnce { event in
                let fail =
                    event.kind == .liked
                    && failures.withLock { left in
                        defer { left = max(0, left - 1) }
                        return left > 0
                    }
                if fail { throw Unreachable() }
            })
        try subscriber.start()
        defer { subscriber.stop() }
        try await service.like(userID: "user2", postID: "post1")
        try await logged.wait(within: 20, "the retry to be logged") { $0.contains { $0.kind == .subscriberRetrying } }
        let retry = try #require(logged.values.first { $0.kind == .subscriberRetrying })
        #expect(retry.level == .warning)
        #expect(retry.fields["subscriber"] == "mailer")
        #expect(retry.fields["error"] == #"durable subscriber "mailer"'s handler failed on event 7: the mail server is unreachable"#)
        #expect(retry.fields["location"] == service.backend.traits.location)
        #expect(retry.message.hasPrefix(#"durable subscriber "mailer" failed a pass and retries in 10 ms"#))
    }

    @Test func slowCommandsAreLoggedAboveTheThreshold() async throws {
        let dir = TemporaryDirectory()
        let logged = AsyncLog<FeedLogEvent>()
        var options = FeedOpenOptions()
        options.slowCommandThreshold = .zero
        let service = try makeService(at: dir.file("feed.sqlite"), options: options, logger: { logged.append($0) })
        try await service.like(userID: "user2", postID: "post1")
        _ = try await service.perform([
            LikeCommand(.like, userID: "user3", postID: "post1"), LikeCommand(.like, userID: "user3", postID: "post2"),
        ])
        let slow = logged.values.filter { $0.kind == .slowCommand }
        // The set-up's commands (3 users, 3 posts), then the like and the batch.
        #expect(
            slow.map { $0.fields["command"] } == [
                "createUser", "createUser", "createUser", "createPost", "createPost", "createPost", "like", "perform",
            ])
        #expect(slow.last?.fields["commands"] == "2")
        #expect(slow.allSatisfy { $0.level == .warning && $0.fields["milliseconds"] != nil })
        // Queries are timed against the same threshold.
        _ = try await service.feedPage(viewerID: "user2")
        _ = try await service.post(id: "post1", viewerID: nil)
        #expect(logged.values.filter { $0.kind == .slowQuery }.map { $0.fields["query"] } == ["feedPage", "post"])
        // Off by default: a threshold of a second, and no logger at all unless one is given.
        #expect(FeedOpenOptions().slowCommandThreshold == .seconds(1))
        #expect(FeedService.Configuration().logger == nil)
    }

    /// A replica whose source is unreachable retries with backoff, and each retry is logged on the replica's service.
    @Test func aReplicaRetryingAnUnreachableSourceIsLogged() async throws {
        let dir = TemporaryDirectory()
        let logged = AsyncLog<FeedLogEvent>()
        let replica = try FeedService(location: dir.file("phone.sqlite"), logger: { logged.append($0) })
        defer { replica.close() }
        let source = dir.file("missing-source.sqlite")
        try replica.makeReplica(of: source, userID: "alice", clientID: UUID().uuidString.lowercased())
        let sync = try ReplicaSync(
            replica: replica, transport: InProcessSyncTransport(location: source, userID: "alice"),
            retry: .init(attempts: 3, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(2)))
        await #expect(throws: SyncError.self) { try await sync.sync() }
        let retries = logged.values.filter { $0.kind == .syncRetrying }
        #expect(retries.map { $0.fields["delayMilliseconds"] } == ["1", "2"])
        #expect(retries.allSatisfy { $0.level == .warning && $0.fields["location"] == replica.backend.traits.location })
    }

    /// A write that PostgreSQL picks as a deadlock's victim runs again, and the retry is logged.
    @Test func aPostgreSQLWriteRetriedAfterADeadlockIsLogged() async throws {
        let dir = TemporaryDirectory()
        guard let location = try TestBackend.postgresql.makeLocation(in: dir, "retry") else { return }
        let logged = AsyncLog<FeedLogEvent>()
        let service = try makeService(at: location, logger: { logged.append($0) })
        defer { service.close() }
        // Both services log: the deadlock check runs in whichever transaction has waited past `deadlock_timeout`
        // when the cycle closes, so either may be the victim (on a loaded machine, the blocker).
        let blocker = try FeedService(location: location, logger: { logged.append($0) })
        defer { blocker.close() }
        let watcher = try FeedService(location: location)
        defer { watcher.close() }
        let attempts = Box(0)
        let headHeld = DispatchSemaphore(value: 0)
        // The blocker takes the event log's head first, waits until the like holds post1 and waits for the head, then
        // asks for post1: a cycle. The victim rolls back and runs again (the blocker's second attempt does nothing).
        // Both blocking calls run on threads of their own, not on the cooperative pool: on a loaded machine (a
        // sanitizer run of many suites) the like could otherwise wait for a pool thread past the blocker's wait, and
        // the cycle would never close.
        let blocking = Task.detached(executorPreference: ThreadPerJobExecutor.shared) {
            try blocker.backend.write(
                { tx in
                    let first = attempts.withLock { count -> Bool in
                        count += 1
                        return count == 1
                    }
                    guard first else { return }
                    _ = try tx.userStatements.fetch("SELECT last_seq FROM event_log_head WHERE id = 1 FOR UPDATE", [])
                    headHeld.signal()
                    let deadline = Date(timeIntervalSinceNow: 30)
                    while Date() < deadline {
                        let waiting = try watcher.backend.readOnce { tx in
                            try tx.userStatements.fetch(
                                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
                                [])
                        }
                        if case .integer(let count)? = waiting.first?.first, count > 0 { break }
                        usleep(1_000)
                    }
                    _ = try tx.userStatements.fetch("UPDATE posts SET like_count = like_count WHERE id = $1 RETURNING id", [.text("post1")])
                }, afterCommit: { _ in })
        }
        // The like starts once the blocker holds the head: started first, it could commit before the blocker began.
        let like = Task.detached(executorPreference: ThreadPerJobExecutor.shared) {
            guard headHeld.wait(timeout: .now() + 60) == .success else { throw CancellationError() }
            return try service.like(userID: "user2", postID: "post1")
        }
        _ = try await value(of: like, within: 60, "the like to commit")
        try await value(of: blocking, within: 60, "the blocker to commit")
        let retried = try #require(logged.values.first { $0.kind == .writeRetried }, "the retry is logged")
        #expect(retried.fields["code"] == "40P01" && retried.fields["attempt"] == "2")
        #expect(try await service.post(id: "post1", viewerID: "user2").liked)
        #expect(try await service.check().isEmpty)
    }

    /// Everything logged while a PostgreSQL service works, loses its change watch's connection and gets it back, retries
    /// a durable subscriber and closes names the database without the URL's password.
    @Test func aPostgreSQLPasswordNeverAppearsInALoggedText() async throws {
        let dir = TemporaryDirectory()
        guard let location = try TestBackend.postgresql.makeLocation(in: dir, "logging") else { return }
        let password = try #require(URLComponents(string: location)?.password, "the test server's URL has a password")
        try #require(!password.isEmpty)
        let logged = AsyncLog<FeedLogEvent>()
        var options = FeedOpenOptions()
        options.slowCommandThreshold = .zero
        let service = try makeService(at: location, options: options, logger: { logged.append($0) })
        let other = try FeedService(location: location)
        defer { other.close() }
        let runner = Task { try await service.run() }
        let failures = Box(1)
        struct Refused: Error {}
        let subscriber = DurableSubscriber(
            name: "logged", service: service,
            delivery: .atLeastOnce { event in
                if event.kind == .liked
                    && failures.withLock({ left in
                        defer { left = 0 }
                        return left > 0
                    })
                {
                    throw Refused()
                }
            })
        try subscriber.start()
        try await service.like(userID: "user2", postID: "post1")
        try await logged.wait(within: 20, "the subscriber's retry") { $0.contains { $0.kind == .subscriberRetrying } }
        subscriber.stop()
        try await waitUntil(within: 30, "run() to start its watch") { service.sharedWatch.isRunning }
        // End every other session on the database: the watch loses its connection, reports it, and reconnects.
        _ = try other.backend.readOnce { tx in
            try tx.userStatements.fetch(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
                [])
        }
        let seq = try #require(try await other.like(userID: "user3", postID: "post1").seq)
        try await logged.wait(within: 60, "the watch to fail and recover") {
            $0.contains { $0.kind == .changeWatchFailed } && $0.contains { $0.kind == .changeWatchRecovered }
        }
        // The service's own pooled connections were ended too: its next command opens a new one and says so.
        _ = try await service.like(userID: "user3", postID: "post2")
        let reconnect = try #require(logged.values.first { $0.kind == .reconnected }, "the reconnect is logged")
        #expect(reconnect.level == .warning && reconnect.fields["lost"].flatMap(Int.init).map { $0 >= 1 } == true)
        #expect(await service.waitForDelivery(through: seq, timeout: .seconds(60)))
        _ = try await service.feedPage(viewerID: "user2")
        runner.cancel()
        try await value(of: runner, within: 20, "run() to end")
        let events = logged.values
        #expect(events.contains { $0.kind == .slowCommand } && events.contains { $0.kind == .serviceClosed })
        #expect(events.contains { $0.kind == .slowQuery })
        for event in events {
            #expect(!event.description.contains(password), "\(event.kind) logged the password")
            #expect(!event.fields.keys.contains { $0.contains(password) })
        }
        #expect(!service.backend.traits.location.contains(password))
        #expect(events.allSatisfy { $0.fields["location"] == service.backend.traits.location })
    }
}
