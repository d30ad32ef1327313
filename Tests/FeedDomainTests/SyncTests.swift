import FeedSync
import FeedCore
import FeedDependencies
@testable import FeedDomain
import FeedPublishers
import FeedSQLite
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// Blocks: waits for writer threads, deliveries and subscriber signals.
@Suite(.ownThreads) struct DurableSubscriberTests {
    @Test(arguments: TestBackend.allCases) func catchesUpThenFollowsWithNoGapAndNoDuplicateWhileWritesArrive(on backend: TestBackend) throws
    {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        for i in 0..<300 { _ = try service.toggle(userID: "user\(1 + i % 3)", postID: "post\(1 + i % 3)") }
        let seen = LockedLog<Int64>()
        let writerDone = DispatchSemaphore(value: 0)
        let subscriber = DurableSubscriber(
            name: "audit", service: service, batchSize: 50,
            delivery: .atLeastOnce { event in
                seen.append(event.seq)
            })
        // Writes keep arriving from another thread while the subscriber catches up and switches to live.
        let writer = Thread {
            for i in 0..<300 { _ = try? service.toggle(userID: "user\(1 + i % 3)", postID: "post\(1 + (i + 1) % 3)") }
            writerDone.signal()
        }
        writer.start()
        try subscriber.start()
        // A stall bound: 300 commands take well under a second alone, and tens of seconds under ThreadSanitizer in a
        // loaded run.
        #expect(writerDone.wait(timeout: .now() + 120) == .success)
        let last = try service.status().lastSeq
        #expect(seen.wait { $0.last == last })
        subscriber.stop()
        let all = try service.events(after: 0).map(\.seq)
        #expect(seen.values == all)
    }

    @Test(arguments: TestBackend.allCases) func transactionalDeliveryIsExactlyOnceAcrossRestarts(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try service.executeSQL("CREATE TABLE applied (seq BIGINT PRIMARY KEY)")
        let delivery = DurableSubscriber.Delivery.transactional { event, db in
            try db.run("INSERT INTO applied (seq) VALUES (?)", event.seq)
        }
        for i in 0..<20 { _ = try service.toggle(userID: "user1", postID: "post\(1 + i % 3)") }
        do {
            let first = DurableSubscriber(name: "mirror", service: service, batchSize: 7, delivery: delivery)
            #expect(try first.catchUp() == 26)
        }
        for i in 0..<10 { _ = try service.toggle(userID: "user2", postID: "post\(1 + i % 3)") }
        let second = DurableSubscriber(name: "mirror", service: service, batchSize: 7, delivery: delivery)
        #expect(try second.catchUp() == 10)
        #expect(try second.catchUp() == 0)
        let applied = try service.firstColumn("SELECT seq FROM applied ORDER BY seq").compactMap(\.integer)
        #expect(applied == (try service.events(after: 0).map(\.seq)))
    }

    @Test(arguments: TestBackend.allCases) func failingEffectRollsBackItsBatchAndRetriesFromTheCursor(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try service.executeSQL("CREATE TABLE applied (seq BIGINT PRIMARY KEY)")
        for _ in 0..<4 { _ = try service.toggle(userID: "user1", postID: "post1") }
        let failOn = Box<Int64?>(8)
        struct Boom: Error {}
        let subscriber = DurableSubscriber(
            name: "flaky", service: service, batchSize: 5,
            delivery: .transactional { event, db in
                if failOn.withLock({ $0 == event.seq }) { throw Boom() }
                try db.run("INSERT INTO applied (seq) VALUES (?)", event.seq)
            })
        let signals = Recorder(subscriber.signals)
        let error = #expect(throws: FeedError.self) { try subscriber.catchUp() }
        // The handler's own error is carried as thrown, with the subscriber and the event it failed on.
        #expect(error == .handlerFailed(subscriber: "flaky", seq: 8, error: FeedError.HandlerError(Boom())))
        #expect(error?.category == .handler)
        if case .handlerFailed(_, _, let failure)? = error { #expect(failure.error is Boom) }
        #expect(signals.values == [.failed(try #require(error))])
        #expect(try subscriber.cursor() == 5)
        failOn.withLock { $0 = nil }
        #expect(try subscriber.catchUp() == 5)
        let applied = try service.firstColumn("SELECT seq FROM applied ORDER BY seq").compactMap(\.integer)
        #expect(applied == Array(1...10).map(Int64.init))
    }

    @Test(arguments: TestBackend.allCases) func subscriberBehindPrunedLogRebuildsToTheIncrementalState(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let mirrorSQL =
            "CREATE TABLE mirror_a (user_id TEXT, post_id TEXT, PRIMARY KEY (user_id, post_id)); CREATE TABLE mirror_b (user_id TEXT, post_id TEXT, PRIMARY KEY (user_id, post_id));"
        try service.executeSQL(mirrorSQL)
        func incremental(_ table: String) -> DurableSubscriber.Delivery {
            .transactional { event, db in
                guard let post = event.postID else { return }
                switch event.kind {
                case .liked:
                    try db.run(
                        table == "a" ? "INSERT INTO mirror_a VALUES (?, ?)" : "INSERT INTO mirror_b VALUES (?, ?)", event.userID, post)
                case .unliked:
                    try db.run(
                        table == "a"
                            ? "DELETE FROM mirror_a WHERE user_id = ? AND post_id = ?"
                            : "DELETE FROM mirror_b WHERE user_id = ? AND post_id = ?", event.userID, post)
                default: break
                }
            }
        }
        let a = DurableSubscriber(name: "a", service: service, delivery: incremental("a"))
        let b = DurableSubscriber(name: "b", service: service, delivery: incremental("b")) { db in
            try db.execute(
                "DELETE FROM mirror_b; INSERT INTO mirror_b SELECT u.id, p.id FROM likes l JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key;"
            )
        }
        let signals = Recorder(b.signals)
        for i in 0..<50 { _ = try service.toggle(userID: "user\(1 + i % 3)", postID: "post\(1 + (i * 7) % 3)") }
        try b.catchUp()
        for i in 0..<50 { _ = try service.toggle(userID: "user\(1 + i % 2)", postID: "post\(1 + (i * 5) % 3)") }
        // Subscriber a follows every event; then the log is pruned past b's cursor.
        try a.catchUp()
        let last = try service.status().lastSeq
        #expect(try service.pruneEvents(through: last - 3) > 0)
        try b.catchUp()
        #expect(signals.values.contains(.needsRebuild(cursor: last - 50, prunedThrough: last - 3)))
        #expect(signals.values.contains(.rebuilt(seq: last)))
        let mirrorA = try service.firstColumn("SELECT user_id || '/' || post_id FROM mirror_a ORDER BY 1").compactMap(\.text)
        let mirrorB = try service.firstColumn("SELECT user_id || '/' || post_id FROM mirror_b ORDER BY 1").compactMap(\.text)
        let likes = try service.backend.read { tx in try tx.allLikes() }.map { "\($0.userID)/\($0.postID)" }.sorted()
        #expect(mirrorA == likes)
        #expect(mirrorB == mirrorA)
        #expect(try b.cursor() == last)
    }

    @Test(arguments: TestBackend.allCases) func subscriberWithoutRebuildReportsThePruning(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        for _ in 0..<5 { _ = try service.toggle(userID: "user1", postID: "post1") }
        try service.pruneEvents(through: 4)
        let subscriber = DurableSubscriber(name: "late", service: service, delivery: .atLeastOnce { _ in })
        let signals = Recorder(subscriber.signals)
        #expect(throws: FeedError.historyPruned(after: 0, prunedThrough: 4)) { try subscriber.catchUp() }
        #expect(signals.values.first == .needsRebuild(cursor: 0, prunedThrough: 4))
    }

    @Test(arguments: TestBackend.allCases) func aHandlersOwnErrorIsCarriedAndADatabaseFailureUnderItStaysOne(
        on backend: TestBackend
    ) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        struct MailError: Error, CustomStringConvertible {
            let code: Int
            var description: String { "mail server said \(code)" }
        }
        // At least once: the handler's error, as thrown; the cursor stays before the event.
        let mailer = DurableSubscriber(
            name: "mailer", service: service, delivery: .atLeastOnce { event in if event.seq == 4 { throw MailError(code: 451) } })
        let error = #expect(throws: FeedError.self) { try mailer.catchUp() }
        guard case .handlerFailed(let name, let seq, let failure)? = error else {
            Issue.record("not a handler failure: \(String(describing: error))")
            return
        }
        #expect(name == "mailer" && seq == 4)
        #expect((failure.error as? MailError)?.code == 451)
        #expect(error?.description == #"durable subscriber "mailer"'s handler failed on event 4: mail server said 451"#)
        #expect(try mailer.cursor() == 3)
        // A rebuild's own error: no event.
        for _ in 0..<3 { _ = try service.toggle(userID: "user1", postID: "post1") }
        try service.pruneEvents(through: 8)
        let rebuilding = DurableSubscriber(name: "rebuilding", service: service, delivery: .atLeastOnce { _ in }) { _ in
            throw MailError(code: 500)
        }
        #expect(throws: FeedError.handlerFailed(subscriber: "rebuilding", seq: nil, error: FeedError.HandlerError(MailError(code: 500)))) {
            try rebuilding.catchUp()
        }
        // A database failure under a transactional handler (its statement is refused) stays a database error.
        let writer = DurableSubscriber(
            name: "writer", service: service, delivery: .transactional { _, tx in try tx.run("INSERT INTO no_such_table VALUES (1)") }
        ) { _ in }
        #expect(try writer.catchUp() == 0)  // rebuilt to the head: nothing to apply yet
        _ = try service.toggle(userID: "user1", postID: "post1")
        let storage = #expect(throws: FeedError.self) { try writer.catchUp() }
        if case .storage? = storage {} else { Issue.record("not a storage error: \(String(describing: storage))") }
    }

    @Test(arguments: TestBackend.allCases) func pruningEverythingKeepsTheNewestEventSoNoSeqIsReused(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let last = try #require(try service.toggle(userID: "user1", postID: "post1").seq)
        #expect(try service.pruneEvents(through: last) == Int(last) - 1)
        #expect(try service.events(after: 0).map(\.seq) == [last])
        let next = try service.toggle(userID: "user1", postID: "post1")
        #expect(next.seq == last + 1)
        #expect(try service.check().isEmpty)
    }

    @Test(arguments: TestBackend.allCases) func pruningByAgeKeepsNewerEvents(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let clock = Box(Date(timeIntervalSince1970: 1_000))
        let service = try withDependencies {
            $0.date = DateGenerator { clock.withLock { $0 } }
        } operation: { () throws in
            try FeedService(location: location)
        }
        try service.createUser(id: "u")
        try service.createPost(id: "p", authorID: "u", body: "b")
        clock.withLock { $0 = Date(timeIntervalSince1970: 2_000) }
        _ = try service.like(userID: "u", postID: "p")
        #expect(try service.pruneEvents(olderThan: Date(timeIntervalSince1970: 1_500)) == 2)
        #expect(try service.events(after: 0).map(\.kind) == [.liked])
        #expect(try service.check().isEmpty)
    }
}

// Blocks: waits for changes from other connections to reach the bridge, and on a 15 s busy timeout.
@Suite(.ownThreads) struct ChangeFeedTests {
    @Test(arguments: TestBackend.allCases) func changesFromAnotherConnectionReachTheBridgeInOrderOnce(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try makeService(at: location)
        // A second service on the same database stands for another process: its own connections, its own bridge.
        let other = try FeedService(location: location)
        let received = Recorder(service.bridge.changes)
        let likes = Recorder(service.bridge.likePublisher)
        let feed = ChangeFeed(service: service)
        try feed.start()
        defer { feed.stop() }
        let baseline = try service.status().lastSeq
        for i in 0..<20 { _ = try other.toggle(userID: "user2", postID: "post\(1 + i % 3)") }
        // Local writes interleave with the other process's: everything arrives in seq order, once.
        for i in 0..<5 { _ = try service.toggle(userID: "user3", postID: "post\(1 + i % 3)") }
        for i in 0..<20 { _ = try other.toggle(userID: "user1", postID: "post\(1 + i % 3)") }
        let last = try service.status().lastSeq
        #expect(received.wait { $0.last?.seq == last })
        #expect(received.values.map(\.seq) == Array((baseline + 1)...last))
        // The like publisher is a second subscriber of the same deliveries: it may get the last one just after.
        #expect(likes.wait { $0.count >= 45 })
        #expect(likes.values.count == 45)
    }

    /// Two services on one database (two processes' worth of connections), each written by two threads at once —
    /// one creating posts (its own transactions, committing concurrently on PostgreSQL), one toggling (group
    /// commit) — with a change feed each: both bridges deliver every seq once, in order, whatever order the
    /// commits handed their ranges to the sequencer.
    @Test(arguments: TestBackend.allCases)
    func concurrentWritersOnTwoServicesReachEveryBridgeInSeqOrderOnce(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        // A 15 s busy timeout, as in the multi-process tests: on SQLite the two services' writers meet on a lock with
        // no queue, and a coverage run of every suite at once kept one out past the library's 5 s (`Docs/Scaling.md`,
        // item 6). This test is about delivery order; no command may fail within 15 s.
        var options = FeedOpenOptions()
        options.busyTimeout = .seconds(15)
        let first = try makeService(at: location, options: options)
        let second = try FeedService(location: location, options: options)
        let received = [Recorder(first.bridge.changes), Recorder(second.bridge.changes)]
        let feeds = [ChangeFeed(service: first), ChangeFeed(service: second)]
        for feed in feeds { try feed.start() }
        defer { for feed in feeds { feed.stop() } }
        let baseline = try first.status().lastSeq
        let failures = LockedLog<String>()
        let done = DispatchGroup()
        for (index, service) in [first, second].enumerated() {
            for role in 0..<2 {
                done.enter()
                Thread {
                    defer { done.leave() }
                    for i in 0..<100 {
                        do {
                            if role == 0 {
                                _ = try service.createPost(id: "p\(index)-\(i)", authorID: "user1", body: "body")
                            } else {
                                _ = try service.toggle(userID: "user\(1 + index)", postID: "post\(1 + i % 3)")
                            }
                        } catch {
                            failures.append("\(error)")
                        }
                    }
                }.start()
            }
        }
        try #require(done.wait(timeout: .now() + 120) == .success, "the writers did not finish in 120 s")
        #expect(failures.values.isEmpty, "\(failures.values.prefix(3))")
        let last = try first.status().lastSeq
        #expect(last == baseline + 400)
        for recorder in received {
            #expect(recorder.wait(seconds: 30) { $0.last?.seq == last })
            #expect(recorder.values.map(\.seq) == Array((baseline + 1)...last))
        }
        #expect(try first.check().isEmpty)
    }

    @Test(arguments: TestBackend.allCases) func projectionsSeeOtherProcessesLikes(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try makeService(at: location)
        let other = try FeedService(location: location)
        let feed = ChangeFeed(service: service)
        try feed.start()
        defer { feed.stop() }
        try withDependencies {
            $0.feedClient = .live(service)
        } operation: { () throws in
            let list = FeedListProjection(viewerID: "user1")
            list.send(.refresh)
            _ = try other.like(userID: "user1", postID: "post3")
            let states = Recorder(list.state)
            // The like reaches the projection through the watch; 30 s like the suite's other cross-process waits (the
            // full parallel run can starve the watch's thread for more than 10 s).
            #expect(states.wait(seconds: 30) { $0.last?.likedPostIDs == ["post3"] })
            #expect(list(\.posts).first { $0.id == "post3" }?.likeCount == 1)
        }
    }

    @Test func busyDatabaseIsReportedAndTheFeedRecovers() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        let service = try makeService(in: dir)
        let other = try FeedService(path: path)
        var options = ChangeFeed.Options()
        options.pollInterval = .milliseconds(20)
        options.maximumBackoff = .milliseconds(50)
        // SQLITE_BUSY for the next checks, as a reader sees it while another process runs recovery.
        let busyChecks = Box(3)
        options.faultInjector = {
            let fail = busyChecks.withLock { count -> Bool in
                guard count > 0 else { return false }
                count -= 1
                return true
            }
            if fail { throw StorageError(SQLiteError(code: .busy, message: "database is locked"), path: path) }
        }
        let feed = ChangeFeed(service: service, options: options)
        let errors = Recorder(feed.errors)
        let received = Recorder(service.bridge.changes)
        try feed.start()
        defer { feed.stop() }
        #expect(errors.wait { $0.count >= 3 })
        #expect(errors.values.allSatisfy { $0.category == .busy })
        // The lock goes away: the feed keeps running and delivers the next change.
        busyChecks.withLock { $0 = 0 }
        let result = try other.like(userID: "user3", postID: "post1")
        #expect(received.wait { $0.last?.seq == result.seq })
        #expect(feed.isRunning)
    }

    @Test(arguments: TestBackend.allCases) func releasingAFeedStopsItsThread(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        weak var released: ChangeFeed?
        do {
            let feed = ChangeFeed(service: service)
            try feed.start()
            #expect(feed.isRunning)
            released = feed
        }
        #expect(released == nil)
    }

    @Test func inMemoryServiceHasNothingToFollow() throws {
        let service = try FeedService(store: try FeedStore.inMemory())
        #expect(throws: FeedError.self) { try ChangeFeed(service: service).start() }
    }
}
