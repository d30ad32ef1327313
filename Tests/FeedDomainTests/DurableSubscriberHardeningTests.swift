import FeedSync
import FeedCore
import FeedDependencies
import FeedDomain
import FeedPublishers
import FeedSQLite
import FeedMigrations
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// Durable subscribers under a shared name, `stop()` from callbacks, bulk loads, and no reachable sender.
// Blocks: waits for writer threads, a child subscriber process and deliveries; semaphores bound deadlocks.
@Suite(.serialized, .ownThreads) struct DurableSubscriberHardeningTests {
    // MARK: - Two instances under one name

    @Test(arguments: TestBackend.allCases)
    func transactionalInstancesSharingANameAcrossConnectionsAndProcessesApplyEachEventOnce(on backend: TestBackend) throws {
        let bench = try benchExecutable()
        let dir = TemporaryDirectory()
        guard let path = try backend.makeLocation(in: dir) else { return }
        // Two writers, three subscribers and a child process share SQLite's write lock, which has no queue; with every
        // suite running at once a writer can be kept out past the library's 5 s (`Docs/Scaling.md`, item 6). This test is
        // about applying each event once; no command may fail within 15 s.
        var options = FeedOpenOptions()
        options.busyTimeout = .seconds(15)
        let service = try makeService(at: path, options: options)
        // Its own connections and bridge: stands for another process inside this one.
        let other = try FeedService(location: path, options: options)
        try service.executeSQL("CREATE TABLE IF NOT EXISTS agent_applied (subscriber TEXT NOT NULL, seq BIGINT NOT NULL)")
        // The same effect as the bench's `agent-subscriber`, so all three instances write to one table.
        let delivery = DurableSubscriber.Delivery.transactional { event, db in
            try db.run("INSERT INTO agent_applied (subscriber, seq) VALUES (?, ?)", "shared", event.seq)
        }
        let first = DurableSubscriber(name: "shared", service: service, batchSize: 5, delivery: delivery)
        let second = DurableSubscriber(name: "shared", service: other, batchSize: 7, delivery: delivery)
        let child = try Child(bench, ["agent-subscriber", "--db", path, "--name", "shared"])
        defer { child.kill() }
        #expect(child.lines.wait(seconds: 60) { $0.contains { $0.hasPrefix("applied ") } }, "the child subscriber did not start")
        try first.start()
        try second.start()

        // Each writer's commits wake the instance on its own bridge; every instance reads the whole log.
        let failures = LockedLog<String>()
        let writers = [(service, "user2"), (other, "user3")].map { writer, user in
            spawn {
                for i in 0..<250 {
                    do {
                        _ = try writer.toggle(userID: user, postID: "post\(1 + i % 3)")
                    } catch {
                        failures.append("\(error)")
                    }
                }
            }
        }
        for writer in writers { #expect(writer.wait(timeout: .now() + 120) == .success, "a writer did not finish") }
        try first.catchUp()
        try second.catchUp()
        let last = try service.status().lastSeq
        #expect(try first.cursor() == last)
        // The child follows through its change feed; its cursor is the shared one.
        #expect(child.lines.wait(seconds: 60) { $0.contains("applied \(last)") }, "the child never caught up")
        child.send("stop")
        #expect(child.wait())
        first.stop()
        second.stop()

        #expect(failures.values.isEmpty, "\(failures.values.prefix(3))")
        let applied = try service.firstColumn("SELECT seq FROM agent_applied WHERE subscriber = 'shared' ORDER BY seq")
            .compactMap(\.integer)
        let distinct =
            try service.firstColumn("SELECT count(DISTINCT seq) FROM agent_applied WHERE subscriber = 'shared'").first?.integer ?? 0
        let logSeqs = try service.events(after: 0).map(\.seq)
        #expect(Int64(applied.count) == distinct, "\(Int64(applied.count) - distinct) events were applied twice")
        #expect(applied == logSeqs, "the applied sequence differs from the log")
        #expect(applied.count > 500)
    }

    /// An exclusive subscriber holds its name: a second instance on other connections (another process's) cannot
    /// start or catch up under it until the first stops; instances that do not ask for exclusivity are unaffected.
    @Test(arguments: TestBackend.allCases) func anExclusiveNameIsHeldByOneInstanceAtATime(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try makeService(at: location)
        let other = try FeedService(location: location)
        let applied = LockedLog<Int64>()
        let first = DurableSubscriber(name: "mailer", service: service, delivery: .atLeastOnce { applied.append($0.seq) }, exclusive: true)
        let second = DurableSubscriber(name: "mailer", service: other, delivery: .atLeastOnce { applied.append($0.seq) }, exclusive: true)
        try first.start()
        #expect(throws: FeedError.subscriberTaken("mailer")) { try second.start() }
        #expect(throws: FeedError.subscriberTaken("mailer")) { try second.catchUp() }
        #expect(FeedError.subscriberTaken("mailer").category == .busy)
        let shared = DurableSubscriber(name: "mailer", service: other, delivery: .atLeastOnce { _ in })
        #expect(try shared.catchUp() == 0)  // not exclusive: takes turns on the shared cursor, holds nothing
        let other2 = DurableSubscriber(name: "digest", service: other, delivery: .atLeastOnce { _ in }, exclusive: true)
        try other2.start()
        other2.stop()
        first.stop()
        _ = try service.toggle(userID: "user1", postID: "post1")
        try second.start()  // the name is free again; it catches up from the shared cursor
        #expect(throws: FeedError.subscriberTaken("mailer")) { try first.start() }
        second.stop()
        try first.start()
        first.stop()
        #expect(applied.values == Array(1...(try service.status().lastSeq)))
    }

    @Test(arguments: TestBackend.allCases)
    func atLeastOnceInstancesSharingANameMissNothingAndNeverMoveTheCursorBack(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try makeService(at: location)
        let other = try FeedService(location: location)
        let handled = LockedLog<Int64>()
        // Cursor readings, taken and recorded under one lock so that their order is the order they were read in.
        let cursorReadings = Box<[Int64]>([])
        func delivery(_ reader: FeedService) -> DurableSubscriber.Delivery {
            .atLeastOnce { event in
                handled.append(event.seq)
                try cursorReadings.withLock { readings in
                    let stored = try reader.firstColumn("SELECT last_seq FROM subscriber_cursors WHERE name = 'audit'")
                    readings.append(stored.first?.integer ?? 0)
                }
            }
        }
        let first = DurableSubscriber(name: "audit", service: service, batchSize: 4, delivery: delivery(service))
        let second = DurableSubscriber(name: "audit", service: other, batchSize: 6, delivery: delivery(other))
        try first.start()
        try second.start()
        let writers = [(service, "user1"), (other, "user2")].map { writer, user in
            spawn {
                for i in 0..<200 { _ = try? writer.toggle(userID: user, postID: "post\(1 + i % 3)") }
            }
        }
        for writer in writers { #expect(writer.wait(timeout: .now() + 120) == .success, "a writer did not finish") }
        try first.catchUp()
        try second.catchUp()
        first.stop()
        second.stop()

        let last = try service.status().lastSeq
        let logSeqs = try service.events(after: 0).map(\.seq)
        #expect(logSeqs.count == 406)
        #expect(Set(logSeqs).isSubset(of: Set(handled.values)), "an event was never handled")
        #expect(try first.cursor() == last)
        let readings = cursorReadings.withLock { $0 }
        #expect(zip(readings, readings.dropFirst()).allSatisfy { $0 <= $1 }, "the stored cursor moved back")
    }
}

// MARK: - Support

/// Runs `body` on its own thread; the semaphore is signalled when it returns.
func spawn(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
    let done = DispatchSemaphore(value: 0)
    Thread {
        body()
        done.signal()
    }.start()
    return done
}

/// Objects used by threads a test found deadlocked: kept alive for the rest of the run, since releasing them could
/// block (a sink's `cancel()` waits for its delivery in flight on the stuck thread).
private let abandoned = Box<[AnyObject]>([])

func abandon(_ objects: [AnyObject]) {
    abandoned.withLock { $0 += objects }
}

/// Runs `body` on its own thread and waits for it at most `seconds`: a deadlock fails the test instead of hanging
/// it (the stuck thread is left behind). Rethrows what `body` threw.
func finishes(within seconds: Double = 30, _ body: @escaping @Sendable () throws -> Void) throws -> Bool {
    let failure = Box<(any Error)?>(nil)
    let done = spawn {
        do { try body() } catch { failure.withLock { $0 = error } }
    }
    guard done.wait(timeout: .now() + seconds) == .success else { return false }
    if let error = failure.withLock({ $0 }) { throw error }
    return true
}
