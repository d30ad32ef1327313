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

    @Test func atLeastOnceInstancesSharingANameMissNothingAndNeverMoveTheCursorBack() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let other = try FeedService(path: dir.file("feed.sqlite"))
        let handled = LockedLog<Int64>()
        // Cursor readings, taken and recorded under one lock so that their order is the order they were read in.
        let cursorReadings = Box<[Int64]>([])
        func delivery(_ reader: FeedService) -> DurableSubscriber.Delivery {
            .atLeastOnce { event in
                handled.append(event.seq)
                try cursorReadings.withLock { readings in
                    readings.append(try reader.store.unsafeRead { db in try SubscriberCursorRepository(db).cursor(for: "audit") ?? 0 })
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

    // MARK: - stop() from callbacks

    @Test(arguments: TestBackend.allCases) func stopFromTheHandlerEndsThePassAfterTheCurrentEvent(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        for i in 0..<20 { _ = try service.toggle(userID: "user1", postID: "post\(1 + i % 3)") }
        service.settle()  // delivered before the subscriber starts: no live pass is queued ahead of its own
        let seen = LockedLog<Int64>()
        let nestedCatchUps = LockedLog<Int>()
        let handle = Box<DurableSubscriber?>(nil)
        let subscriber = DurableSubscriber(
            name: "stopper", service: service, batchSize: 100,
            delivery: .atLeastOnce { event in
                seen.append(event.seq)
                guard let subscriber = handle.withLock({ $0 }) else { return }
                // Re-entering from the handler neither deadlocks nor applies anything: this pass goes on.
                if seen.values.count == 3 { nestedCatchUps.append(try subscriber.catchUp()) }
                if seen.values.count == 5 { subscriber.stop() }
            })
        handle.withLock { $0 = subscriber }
        defer { handle.withLock { $0 = nil } }

        try #require(try finishes { try subscriber.start() }, "start() deadlocked")
        let log = try service.events(after: 0).map(\.seq)
        #expect(seen.values == Array(log.prefix(5)))
        #expect(nestedCatchUps.values == [0])
        #expect(try subscriber.cursor() == log[4])

        // Stopped means no live events either: another subscriber of the bridge sees the next change, it does not.
        let witness = Recorder(service.bridge.changes)
        let next = try #require(try service.toggle(userID: "user2", postID: "post1").seq)
        #expect(witness.wait { $0.contains { $0.seq == next } })
        #expect(seen.values.count == 5)
        #expect(try subscriber.cursor() == log[4])

        // An explicit catch-up later applies the rest, once.
        handle.withLock { $0 = nil }
        #expect(try subscriber.catchUp() == log.count - 5 + 1)
        #expect(seen.values == log + [next])
    }

    @Test func stopFromATransactionalHandlerCommitsTheEventsAppliedSoFar() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        try service.store.write { db in try db.execute("CREATE TABLE applied (seq INTEGER PRIMARY KEY)") }
        for i in 0..<20 { _ = try service.toggle(userID: "user1", postID: "post\(1 + i % 3)") }
        // Delivered before the subscriber starts, so that only start()'s own pass runs (no live pass queued).
        service.settle()
        let handle = Box<DurableSubscriber?>(nil)
        let subscriber = DurableSubscriber(
            name: "stopper", service: service, batchSize: 100,
            delivery: .transactional { event, db in
                try db.run("INSERT INTO applied (seq) VALUES (?)", event.seq)
                if try db.fetch("SELECT count(*) FROM applied", []).first?.first?.integer == 5 { handle.withLock { $0 }?.stop() }
            })
        handle.withLock { $0 = subscriber }
        defer { handle.withLock { $0 = nil } }

        try #require(try finishes { try subscriber.start() }, "start() deadlocked")
        let log = try service.events(after: 0).map(\.seq)
        let applied = try service.store.read { db in try db.fetchAll("SELECT seq FROM applied ORDER BY seq") { $0.int64(at: 0) } }
        #expect(applied == Array(log.prefix(5)))
        #expect(try subscriber.cursor() == log[4])
    }

    @Test(arguments: TestBackend.allCases) func stopFromASignalsSinkTakesEffect(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        for i in 0..<10 { _ = try service.toggle(userID: "user1", postID: "post\(1 + i % 3)") }
        service.settle()  // delivered before the subscriber starts: no live pass is queued ahead of its own
        let seen = LockedLog<Int64>()
        let subscriber = DurableSubscriber(name: "signalled", service: service, delivery: .atLeastOnce { seen.append($0.seq) })
        let stopper = subscriber.signals.sink { [weak subscriber] signal in
            if case .caughtUp = signal { subscriber?.stop() }
        }
        defer { stopper.cancel() }
        try #require(try finishes { try subscriber.start() }, "start() deadlocked")
        let log = try service.events(after: 0).map(\.seq)
        #expect(seen.values == log)

        let witness = Recorder(service.bridge.changes)
        let next = try #require(try service.toggle(userID: "user3", postID: "post2").seq)
        #expect(witness.wait { $0.contains { $0.seq == next } })
        #expect(seen.values == log, "a stopped subscriber received a live event")
    }

    @Test(arguments: TestBackend.allCases) func stopOnNeedsRebuildSkipsTheRebuild(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        for _ in 0..<6 { _ = try service.toggle(userID: "user1", postID: "post1") }
        try service.pruneEvents(through: 8)
        let rebuilds = LockedLog<Int>()
        let subscriber = DurableSubscriber(
            name: "late", service: service, delivery: .atLeastOnce { _ in }, rebuild: { _ in rebuilds.append(1) })
        let signals = Recorder(subscriber.signals)
        let stopper = subscriber.signals.sink { [weak subscriber] signal in
            if case .needsRebuild = signal { subscriber?.stop() }
        }
        defer { stopper.cancel() }
        try #require(try finishes { try subscriber.start() }, "start() deadlocked")
        #expect(signals.values == [.needsRebuild(cursor: 0, prunedThrough: 8)])
        #expect(rebuilds.values.isEmpty)
        #expect(try subscriber.cursor() == 0)
    }

    /// A bridge sink (on the delivery executor) stops the subscriber while the subscriber's handler commits a
    /// command: neither waits for the other.
    @Test func stopFromABridgeSinkWhileTheHandlerCommitsDoesNotDeadlock() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let handlerEntered = DispatchSemaphore(value: 0)
        let sinkEntered = DispatchSemaphore(value: 0)
        let seen = LockedLog<Int64>()
        let waits = LockedLog<String>()
        let subscriber = DurableSubscriber(
            name: "committer", service: service,
            delivery: .atLeastOnce { event in
                seen.append(event.seq)
                guard seen.values.count == 1 else { return }
                handlerEntered.signal()
                if sinkEntered.wait(timeout: .now() + 30) == .timedOut { waits.append("sink never entered") }
                _ = try service.like(userID: "user3", postID: "post3")
            })
        let marker = Box<Int64?>(nil)
        let stopper = service.bridge.changes.sink { [weak subscriber] event in
            guard marker.withLock({ $0 == event.seq }) else { return }
            // stop() returns at once; it comes before the signal so that the handler, woken by it, commits after the
            // stop (the other order races the handler's return against this thread's call).
            subscriber?.stop()
            sinkEntered.signal()
        }

        let subscriberThread = spawn { _ = try? subscriber.catchUp() }
        let writerThread = spawn {
            if handlerEntered.wait(timeout: .now() + 30) == .timedOut { waits.append("handler never entered") }
            // The marker's seq is known before its commit delivers it: the writer holds the only write lock.
            let next = (try? service.store.unsafeRead { db in try EventLog(db).lastSeq() }).map { $0 + 1 }
            marker.withLock { $0 = next }
            _ = try? service.toggle(userID: "user2", postID: "post2")
        }
        let writerFinished = writerThread.wait(timeout: .now() + 30) == .success
        let subscriberFinished = subscriberThread.wait(timeout: .now() + 30) == .success
        guard writerFinished, subscriberFinished else {
            Issue.record("deadlock: delivering thread finished \(writerFinished), subscriber's pass finished \(subscriberFinished)")
            // Cancelling the sink would wait for the stuck delivery; leave everything the stuck threads use alone.
            abandon([stopper, subscriber, service])
            return
        }
        stopper.cancel()
        #expect(waits.values.isEmpty, "\(waits.values)")
        #expect(seen.values.count == 1, "the pass went on after stop()")
        #expect(try subscriber.cursor() == seen.values.first)
    }

    // MARK: - Bulk loads

    @Test func bulkLoadMakesASubscriberWithStateRebuildFromTheTables() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        try service.store.write { db in
            try db.execute("CREATE TABLE like_mirror (user_id TEXT NOT NULL, post_id TEXT NOT NULL, PRIMARY KEY (user_id, post_id))")
        }
        let rebuilds = LockedLog<Int>()
        let subscriber = mirrorSubscriber(service: service, rebuilds: rebuilds)
        let signals = Recorder(subscriber.signals)
        for i in 0..<12 { _ = try service.toggle(userID: "user\(1 + i % 3)", postID: "post\(1 + (i * 5) % 3)") }
        service.settle()  // delivered before the subscriber starts: no live pass is queued ahead of its own
        try subscriber.catchUp()
        #expect(try mirrorRows(service) == likeRows(service))
        let cursorBeforeLoad = try subscriber.cursor()
        let lastBeforeLoad = try service.status().lastSeq
        #expect(cursorBeforeLoad == lastBeforeLoad)

        // Seed likes on the bulk path: no events. The subscriber is fully caught up, and would replay nothing.
        let postKeys = try service.store.read { db in
            try db.fetchAll("SELECT post_key FROM posts ORDER BY post_key") { $0.int64(at: 0) }
        }
        try BulkLoader.load(into: service.store) { loader in
            for u in 0..<8 {
                let user = try loader.addUser(id: "bulk\(u)", name: "")
                for post in postKeys where (Int64(u) + post) % 2 == 0 {
                    try loader.addLike(userKey: user, postKey: post, createdAt: Date(timeIntervalSince1970: 0))
                }
            }
        }
        #expect(try likeRows(service).count > (try mirrorRows(service)).count)
        let liveLike = try #require(try service.like(userID: "bulk1", postID: "post2").seq)

        try subscriber.start()
        defer { subscriber.stop() }
        #expect(
            signals.values.suffix(3) == [
                .needsRebuild(cursor: cursorBeforeLoad, prunedThrough: lastBeforeLoad), .rebuilt(seq: liveLike),
                .caughtUp(seq: liveLike),
            ])
        #expect(try mirrorRows(service) == likeRows(service))
        #expect(try subscriber.cursor() == liveLike)

        // Once rebuilt, it follows live changes incrementally and does not rebuild again.
        let next = try #require(try service.unlike(userID: "bulk0", postID: "post2").seq)
        #expect(signals.wait { $0.last == .caughtUp(seq: next) })
        #expect(try mirrorRows(service) == likeRows(service))
        #expect(rebuilds.values.count == 1)
    }

    @Test func freshSubscriberOnASeededDatabaseRebuildsOrFailsClearly() throws {
        let dir = TemporaryDirectory()
        let service = try FeedService(path: dir.file("feed.sqlite"))
        try service.store.write { db in
            try db.execute("CREATE TABLE like_mirror (user_id TEXT NOT NULL, post_id TEXT NOT NULL, PRIMARY KEY (user_id, post_id))")
        }
        let summary = try service.seed(SeedPlan(posts: 30, users: 12, likes: 90))
        #expect(summary.likes == 90)
        #expect(try service.status().lastSeq == 0)

        // No rebuild closure: the pass fails, it does not silently start from an empty state.
        let blind = DurableSubscriber(name: "blind", service: service, delivery: .atLeastOnce { _ in })
        let blindSignals = Recorder(blind.signals)
        #expect(throws: FeedError.self) { try blind.catchUp() }
        #expect(blindSignals.values.first == .needsRebuild(cursor: 0, prunedThrough: 0))

        let rebuilds = LockedLog<Int>()
        let subscriber = mirrorSubscriber(service: service, rebuilds: rebuilds)
        let signals = Recorder(subscriber.signals)
        #expect(try subscriber.catchUp() == 0)
        #expect(signals.values == [.needsRebuild(cursor: 0, prunedThrough: 0), .rebuilt(seq: 0), .caughtUp(seq: 0)])
        #expect(try mirrorRows(service).count == 90)
        let seq = try #require(try service.toggle(userID: "user1", postID: "post1").seq)
        #expect(try subscriber.catchUp() == 1)
        #expect(try mirrorRows(service) == likeRows(service))
        #expect(try subscriber.cursor() == seq)
        #expect(rebuilds.values.count == 1)
    }

    @Test func seedWithoutLikesNeedsNoRebuild() throws {
        let dir = TemporaryDirectory()
        let service = try FeedService(path: dir.file("feed.sqlite"))
        try service.seed(SeedPlan(posts: 5, users: 5, likes: 0))
        let seq = try #require(try service.like(userID: "user1", postID: "post1").seq)
        let seen = LockedLog<Int64>()
        let subscriber = DurableSubscriber(name: "plain", service: service, delivery: .atLeastOnce { seen.append($0.seq) })
        #expect(try subscriber.catchUp() == 1)
        #expect(seen.values == [seq])
    }

    @Test func databaseBulkLoadedUnderSchemaVersion1RebuildsItsSubscribersOnce() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        do {
            // A version-1 database that was seeded with likes and has a subscriber that replayed the log.
            let database = try Database(path: path)
            try Migrator(migrations: Migrator.embedded.migrations.filter { $0.version == 1 }).migrate(database)
            try database.write { db in
                try db.execute("UPDATE log_state SET bulk_loaded = 1 WHERE id = 1")
                try SubscriberCursorRepository(db).setCursor(0, for: "old", at: Date(timeIntervalSince1970: 0))
            }
            database.close()
        }
        let service = try FeedService(path: path)
        #expect(try service.store.schemaVersion().database >= 2)
        let rebuilds = LockedLog<Int>()
        let subscriber = DurableSubscriber(
            name: "old", service: service, delivery: .atLeastOnce { _ in }, rebuild: { _ in rebuilds.append(1) })
        let signals = Recorder(subscriber.signals)
        try subscriber.catchUp()
        try subscriber.catchUp()
        #expect(signals.values.first == .needsRebuild(cursor: 0, prunedThrough: 0))
        #expect(rebuilds.values.count == 1)
    }

    // MARK: - No reachable sender

    @Test func walkerFindsPlantedSendersWhereverTheyAreStored() {
        let planted = Planted()
        planted.cycle = planted
        var walker = SenderReachability()
        walker.skip(SkippedHolder.self)
        let report = walker.walk(planted, name: "planted")
        let found = Set(report.findings.map(\.description))
        let expected: Set<String> = [
            "planted.signals: PassthroughPublisher<Signal, Never>",
            "planted.optionalState.some: CurrentValuePublisher<State, Never>",
            "planted.mixed[1]: EventPublisher<FeedError>",
            "planted.mixed[1].subject: PassthroughPublisher<FeedError, Never>",
            "planted.mixed[1].logger: @Sendable (FeedError) -> Void",
            "planted.callbacks[0].value: @Sendable (LikeEvent) -> Void",
            "planted.pending.waiting.sink: any Subscriber<EventRecord, Never>",
            "planted.pending.waiting.sink.receiveValue: @Sendable (EventRecord) -> Void",
            "planted.batch: ([EventRecord]) -> Void",
            "planted.render: @MainActor (State) -> Void",
            "planted.hidden: PassthroughPublisher<EventRecord, Never>",
        ]
        #expect(found == expected, "\(report)")
        #expect(report.skipped == ["planted.skipped"])
        #expect(!report.truncated)
        // The sealed handle and the closure that captures a subject are not senders.
        #expect(!found.contains { $0.hasPrefix("planted.sealed") || $0.hasPrefix("planted.wrapped") })
    }

    @Test(arguments: TestBackend.allCases) func nothingReachableFromADurableSubscriberSends(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let atLeastOnce = DurableSubscriber(name: "outside", service: service, delivery: .atLeastOnce { _ in }, rebuild: { _ in })
        let transactional = DurableSubscriber(name: "inside", service: service, delivery: .transactional { _, _ in })
        try atLeastOnce.start()
        try transactional.start()
        defer {
            atLeastOnce.stop()
            transactional.stop()
        }
        let listeners = [atLeastOnce.signals.sink { _ in }, transactional.signals.sink { _ in }]
        defer { for listener in listeners { listener.cancel() } }

        // FeedService (and the bridge inside it) is checked by its own tests; skipping it keeps this one about
        // the subscriber, whatever the service holds.
        var walker = SenderReachability()
        walker.skip(FeedService.self)
        for (name, subscriber) in [("atLeastOnce", atLeastOnce), ("transactional", transactional)] {
            let report = walker.walk(subscriber, name: name)
            #expect(report.findings.isEmpty, "\(report)")
            #expect(!report.truncated)
            #expect(report.visitedValues > 1)
            let signals: Any = subscriber.signals
            #expect(!(signals is PassthroughPublisher<DurableSubscriber.Signal, Never>))
            #expect(walker.walk(signals, name: "\(name).signals").findings.isEmpty)
        }
    }

    // MARK: - Helpers

    private func mirrorSubscriber(service: FeedService, rebuilds: LockedLog<Int>) -> DurableSubscriber {
        DurableSubscriber(
            name: "mirror", service: service, batchSize: 5,
            delivery: .transactional { event, db in
                guard let post = event.postID else { return }
                switch event.kind {
                case .liked: try db.run("INSERT INTO like_mirror (user_id, post_id) VALUES (?, ?)", event.userID, post)
                case .unliked: try db.run("DELETE FROM like_mirror WHERE user_id = ? AND post_id = ?", event.userID, post)
                case .postCreated, .userCreated, .likeCountChanged: break
                }
            },
            rebuild: { db in
                rebuilds.append(1)
                try db.execute(
                    """
                    DELETE FROM like_mirror;
                    INSERT INTO like_mirror (user_id, post_id)
                    SELECT u.id, p.id FROM likes l JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key;
                    """)
            })
    }

    private func mirrorRows(_ service: FeedService) throws -> [String] {
        try service.store.read { db in
            try db.fetchAll("SELECT user_id || '/' || post_id FROM like_mirror ORDER BY 1") { $0.string(at: 0) }
        }
    }

    private func likeRows(_ service: FeedService) throws -> [String] {
        try service.store.read { db in try LikeRepository(db).allPairs().map { "\($0.userID)/\($0.postID)" }.sorted() }
    }
}

// MARK: - Support

/// Runs `body` on its own thread; the semaphore is signalled when it returns.
private func spawn(_ body: @escaping @Sendable () -> Void) -> DispatchSemaphore {
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

private func abandon(_ objects: [AnyObject]) {
    abandoned.withLock { $0 += objects }
}

/// Runs `body` on its own thread and waits for it at most `seconds`: a deadlock fails the test instead of hanging
/// it (the stuck thread is left behind). Rethrows what `body` threw.
private func finishes(within seconds: Double = 30, _ body: @escaping @Sendable () throws -> Void) throws -> Bool {
    let failure = Box<(any Error)?>(nil)
    let done = spawn {
        do { try body() } catch { failure.withLock { $0 = error } }
    }
    guard done.wait(timeout: .now() + seconds) == .success else { return false }
    if let error = failure.withLock({ $0 }) { throw error }
    return true
}

/// A base class whose stored sender a walk must find through `superclassMirror`.
private class PlantedBase: @unchecked Sendable {
    // `@unchecked Sendable`: never mutated after init except `cycle`, set once before the walk on the test's thread.
    let hidden = PassthroughPublisher<EventRecord, Never>()
}

/// An enum whose payload holds a subscriber.
private enum Pending {
    case idle
    case waiting(id: Int, sink: Subscribers.Sink<EventRecord, Never>)
}

/// A holder the walk is told to skip.
private final class SkippedHolder: Sendable {
    let subject = PassthroughPublisher<EventRecord, Never>()
}

/// Senders stored every way a walk must see, and two ways it must not (a sealed handle, a closure's captures).
private final class Planted: PlantedBase, @unchecked Sendable {
    let signals = PassthroughPublisher<DurableSubscriber.Signal, Never>()
    let optionalState: CurrentValuePublisher<FeedListProjection.State, Never>? = CurrentValuePublisher(
        FeedListProjection.State(viewerID: nil))
    let mixed: [Any] = [1, EventPublisher<FeedError>(), "text"]
    let callbacks: [String: @Sendable (LikeEvent) -> Void] = ["like": { _ in }]
    let pending = Pending.waiting(id: 1, sink: Subscribers.Sink(receiveCompletion: { _ in }, receiveValue: { _ in }))
    let batch: ([EventRecord]) -> Void = { _ in }
    let render: @MainActor (PostDetailProjection.State) -> Void = { _ in }
    let sealed = PassthroughPublisher<EventRecord, Never>().sealed()
    let wrapped: @Sendable (Int) -> Void = { [subject = PassthroughPublisher<EventRecord, Never>()] _ in _ = subject }
    let skipped = SkippedHolder()
    var cycle: Planted?
    let idle = Pending.idle
}
