import FeedSync
import FeedCore
@testable import FeedDomain
import FeedPublishers
import FeedTestSupport
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
        #expect(retry.fields["location"] == service.backend.location)
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
        // Off by default: a threshold of a second, and no logger at all unless one is given.
        #expect(FeedOpenOptions().slowCommandThreshold == .seconds(1))
        #expect(FeedService.Configuration().logger == nil)
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
            try tx.fetch(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()",
                [])
        }
        let seq = try #require(try await other.like(userID: "user3", postID: "post1").seq)
        try await logged.wait(within: 60, "the watch to fail and recover") {
            $0.contains { $0.kind == .changeWatchFailed } && $0.contains { $0.kind == .changeWatchRecovered }
        }
        #expect(await service.waitForDelivery(through: seq, timeout: .seconds(60)))
        runner.cancel()
        try await value(of: runner, within: 20, "run() to end")
        let events = logged.values
        #expect(events.contains { $0.kind == .slowCommand } && events.contains { $0.kind == .serviceClosed })
        for event in events {
            #expect(!event.description.contains(password), "\(event.kind) logged the password")
            #expect(!event.fields.keys.contains { $0.contains(password) })
        }
        #expect(!service.backend.location.contains(password))
        #expect(events.allSatisfy { $0.fields["location"] == service.backend.location })
    }
}
