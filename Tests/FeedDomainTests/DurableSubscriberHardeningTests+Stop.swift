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

/// `stop()` called from a subscriber's own handler, its signals, and a bridge sink.
extension DurableSubscriberHardeningTests {
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

    @Test(arguments: TestBackend.allCases) func stopFromATransactionalHandlerCommitsTheEventsAppliedSoFar(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try service.executeSQL("CREATE TABLE applied (seq BIGINT PRIMARY KEY)")
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
        let applied = try service.firstColumn("SELECT seq FROM applied ORDER BY seq").compactMap(\.integer)
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

    /// A bridge sink (on its own queue) stops the subscriber while the subscriber's handler commits a
    /// command: neither waits for the other.
    @Test(arguments: TestBackend.allCases) func stopFromABridgeSinkWhileTheHandlerCommitsDoesNotDeadlock(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
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
            // The marker's seq is known before its commit delivers it: nothing else writes until the sink has run.
            let next = (try? service.status().lastSeq).map { $0 + 1 }
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
}
