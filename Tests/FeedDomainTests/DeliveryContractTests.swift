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

/// The threading contract of delivery and projections (`Docs/Architecture.md`, "Threading contract"), each rule
/// driven deterministically: interleavings are forced with semaphores, and every wait has a bound, so a regression
/// fails instead of hanging.
// Blocks: waits on semaphores and for threads that commit while effects run.
@Suite(.ownThreads) struct DeliveryContractTests {
    /// A projection busy in an effect on thread B while another thread's commit is delivered to it: the projection's
    /// bridge queue waits for its turn (its one permitted wait), the effect's command never waits for delivery,
    /// so both finish, and at quiescence the projection equals the database.
    @Test(arguments: TestBackend.allCases) func deliveryIntoAProjectionBusyInAnEffectWaitsForItAndNothingWaitsBack(
        on backend: TestBackend
    ) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let effectEntered = DispatchSemaphore(value: 0)
        let otherCommitted = DispatchSemaphore(value: 0)
        var client = FeedClient.live(service)
        client.toggle = { userID, postID throws(FeedError) in
            effectEntered.signal()
            // Hold the effect until A's command returned, so that its delivery finds the projection busy.
            _ = otherCommitted.wait(timeout: .now() + 10)
            return try service.toggle(userID: userID, postID: postID)
        }
        try withDependencies {
            $0.feedClient = client
        } operation: { () throws in
            let detail = PostDetailProjection(postID: "post1", viewerID: "user1")
            detail.send(.load)
            let bothDone = DispatchGroup()
            bothDone.enter()
            Thread.detachNewThread {
                detail.send(.toggle)  // B: the like effect
                bothDone.leave()
            }
            #expect(effectEntered.wait(timeout: .now() + 10) == .success)
            let other = try service.like(userID: "user2", postID: "post1")  // A: returns at its commit
            otherCommitted.signal()
            #expect(bothDone.wait(timeout: .now() + 20) == .success, "the threads deadlocked")
            let last = try service.status().lastSeq
            #expect(last > (other.seq ?? 0))
            #expect(service.waitForDelivery(through: last))
            let truth = try service.post(id: "post1", viewerID: "user1")
            #expect(detail(\.liked) == truth.liked)
            #expect(detail(\.likeCount) == truth.post.likeCount)
            #expect(detail(\.likeCount) == 2)
        }
    }

    /// A wait for delivery inside a delivery would wait for itself: `waitForDelivery` from inside a sink answers at
    /// once.
    @Test(arguments: TestBackend.allCases) func waitForDeliveryInsideASinkAnswersAtOnce(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let answers = LockedLog<Bool>()
        let sink = service.bridge.changes.sink { event in
            answers.append(service.waitForDelivery(through: event.seq, timeout: .seconds(30)))
        }
        defer { sink.cancel() }
        let start = ContinuousClock.now
        let result = try service.like(userID: "user1", postID: "post1")
        #expect(service.waitForDelivery(through: try #require(result.seq)))
        #expect(answers.values == [false], "the event being delivered is not delivered yet")
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    /// A command run from inside a delivery callback returns at its commit, and its events follow right after the
    /// current ones, in seq order.
    @Test(arguments: TestBackend.allCases) func commandInsideADeliveryReturnsAndItsEventFollowsInOrder(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let seen = Recorder(service.bridge.changes.map(\.seq))
        let nested = service.bridge.changes.sink { event in
            if event.userID == "user1", event.kind == .liked {
                _ = try? service.like(userID: "user2", postID: event.postID ?? "")
            }
        }
        defer { nested.cancel() }
        let first = try service.like(userID: "user1", postID: "post1")
        #expect(seen.wait { $0.count >= 2 })
        #expect(service.waitForDelivery(through: first.seq! + 1))
        let seqs = seen.values
        #expect(seqs == [first.seq!, first.seq! + 1])
        #expect(service.bridge.lastDeliveredSeq == first.seq! + 1)
    }

    /// `send` on a projection from inside a subscriber of the bridge (an app reacting to a change) applies the action
    /// before it returns, as it does anywhere else: the sink reads the refreshed list right after it.
    @Test(arguments: TestBackend.allCases) func sendFromADeliveryAppliesTheActionBeforeItReturns(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try withDependencies {
            $0.feedClient = .live(service)
        } operation: { () throws in
            let feed = FeedListProjection(viewerID: "user1")
            let seenInSink = LockedLog<Bool>()
            let refresher = service.bridge.changes.sink { event in
                guard event.kind == .postCreated else { return }
                feed.send(.refresh)
                seenInSink.append(feed(\.posts).contains { $0.id == "post9" })
            }
            defer { refresher.cancel() }
            try service.createPost(id: "post9", authorID: "user2", body: "new")
            #expect(service.waitForDelivery(through: try service.status().lastSeq))
            #expect(seenInSink.values == [true])
            #expect(feed(\.isLoading) == false)
        }
    }

    /// A `COMMIT` that fails hands nothing to the sequencer: the seq it would have taken is reused by the next
    /// commit (here another process's), and that event is delivered, not skipped.
    @Test func failedCommitDoesNotSkipTheSeqWhenAnotherProcessReusesIt() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let before = service.bridge.lastDeliveredSeq
        let seen = Recorder(service.bridge.changes.map(\.seq))
        // The foreign-key violation is deferred to COMMIT, so the body succeeds and COMMIT fails.
        #expect(throws: FeedError.self) {
            try service.commit(value: nil) { db, events in
                try db.userStatements.execute("PRAGMA defer_foreign_keys = ON")
                events.append(
                    try db.appendEvent(kind: .liked, userID: "user1", postID: "post1", likeCount: 1, at: Date()))
                _ = try db.run("INSERT INTO likes (user_key, post_key, created_at) VALUES (?, ?, ?)", Int64(999), Int64(999), Int64(0))
            }
        }
        #expect(service.bridge.lastDeliveredSeq == before)
        // "Another process": a second service with its own connections and bridge on the same file.
        let other = try FeedService(path: dir.file("feed.sqlite"))
        let foreign = try other.like(userID: "user3", postID: "post2")
        #expect(foreign.seq == before + 1, "the failed commit's seq is reused")
        #expect(try service.publishCommittedEvents() == 1)
        #expect(service.waitForDelivery(through: before + 1))
        #expect(seen.values == [before + 1])
        // And this process's next command follows it.
        let next = try service.like(userID: "user2", postID: "post3")
        #expect(service.waitForDelivery(through: next.seq!))
        #expect(seen.values == [before + 1, next.seq!])
    }

    /// A local commit does not wait for the change feed's read, and the change feed's read does not wait for a
    /// local writer: reading other processes' events uses a reader connection while the writer is held.
    @Test func publishingOtherProcessesEventsDoesNotNeedTheWriter() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let other = try FeedService(path: dir.file("feed.sqlite"))
        let foreign = try other.like(userID: "user3", postID: "post2")
        let published = LockedLog<Int>()
        let done = DispatchSemaphore(value: 0)
        // Hold this process's writer connection while another thread publishes.
        try service.store.database.writeWithoutTransaction { _ in
            Thread.detachNewThread {
                published.append((try? service.publishCommittedEvents()) ?? -1)
                done.signal()
            }
            #expect(done.wait(timeout: .now() + 10) == .success, "publishing waited for the writer connection")
        }
        #expect(published.values == [1])
        #expect(service.waitForDelivery(through: foreign.seq!))
        #expect(service.bridge.lastDeliveredSeq == foreign.seq!)
    }

    /// Overlapping ranges (the change feed read a local commit's event before the writer handed it over) are
    /// delivered once each, in order.
    @Test func overlappingRangesDeliverEachSeqOnceInOrder() {
        let delivered = LockedLog<Int64>()
        let sequencer = EventSequencer { batch in
            for event in batch.events { delivered.append(event.seq) }
        }
        sequencer.setBaseline(10)
        func events(_ seqs: ClosedRange<Int64>) -> [EventRecord] {
            seqs.map {
                EventRecord(seq: $0, kind: .liked, userID: "u", postID: "p", likeCount: 1, at: Date(timeIntervalSince1970: 0))
            }
        }
        // A local writer hands over 11...12; the change feed, which read the log after 10 before that, hands
        // over 11...13: only 13 is new, and every seq goes out once, in order.
        #expect(sequencer.submit(after: 10, through: 12, events: events(11...12)) == 2)
        #expect(sequencer.submit(after: 10, through: 13, events: events(11...13)) == 1)
        #expect(sequencer.highestKnownSeq == 13)
        #expect(sequencer.waitForDelivery(through: 13, timeout: .seconds(10)))
        #expect(delivered.values == [11, 12, 13])
        // A range entirely known already adds nothing.
        #expect(sequencer.submit(after: 11, through: 13, events: events(12...13)) == 0)
        #expect(sequencer.submit(after: 13, through: 15, events: events(14...15)) == 2)
        #expect(sequencer.waitForDelivery(through: 15, timeout: .seconds(10)))
        #expect(delivered.values == [11, 12, 13, 14, 15])
        #expect(sequencer.lastDeliveredSeq == 15)
    }

    /// A command run from inside a write on the same thread (here a transactional durable-subscriber handler, which
    /// runs inside the writer's transaction) fails with a clear error instead of waiting for the writer it holds.
    @Test(arguments: TestBackend.allCases) func commandFromInsideAWriteOnTheSameThreadFailsInsteadOfDeadlocking(
        on backend: TestBackend
    ) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let errors = LockedLog<String>()
        let handled = DispatchSemaphore(value: 0)
        let subscriber = DurableSubscriber(
            name: "reentrant", service: service,
            delivery: .transactional { event, _ in
                guard event.kind == .liked, event.userID == "user1" else { return }
                do {
                    try service.like(userID: "user2", postID: "post3")
                } catch {
                    errors.append("\(error)")
                }
                do {
                    try service.createPost(id: "post7", authorID: "user1", body: "nested")
                } catch {
                    errors.append("\(error)")
                }
                handled.signal()
            })
        try subscriber.start()
        defer { subscriber.stop() }
        try service.like(userID: "user1", postID: "post1")
        #expect(handled.wait(timeout: .now() + 10) == .success, "the handler deadlocked")
        #expect(errors.values.count == 2)
        #expect(errors.values.allSatisfy { $0.contains("inside") }, "\(errors.values)")
        #expect(try service.post(id: "post3", viewerID: "user2").liked == false)
    }

    /// With nobody listening (no subscriber, no logger) a command's events are delivered as it commits, without a
    /// trip to the delivery executor: `lastDeliveredSeq` has its seq when it returns. A subscriber that attaches
    /// later gets what follows, in order, through the executor.
    @Test func withNobodyListeningEventsAreDeliveredAsTheyCommitAndALaterSubscriberGetsWhatFollows() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        defer { service.close() }
        for round in 0..<50 {
            let result = try service.toggle(userID: "user1", postID: "post\(1 + round % 3)")
            #expect(service.bridge.lastDeliveredSeq == result.seq, "round \(round)")
        }
        let seen = Recorder(service.bridge.changes.map(\.seq))
        let later = try (0..<5).compactMap { _ in try service.toggle(userID: "user2", postID: "post1").seq }
        #expect(seen.wait { $0 == later })
        #expect(service.waitForDelivery(through: later[later.count - 1], timeout: .seconds(10)))
    }
}
