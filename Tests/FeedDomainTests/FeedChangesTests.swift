import FeedSync
import FeedCore
import FeedDependencies
@testable import FeedDomain
import FeedPublishers
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import Testing

@Suite struct FeedChangesTests {
    @Test(arguments: TestBackend.allCases) func backlogThenLiveHandsOutEverySeqOnceInOrderWhileTwoThreadsWrite(
        on backend: TestBackend
    ) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }  // seqs 1...6
        // A backlog of several pages.
        _ = try await service.perform(Array(repeating: LikeCommand(.toggle, userID: "user1", postID: "post1"), count: 250))
        let perWriter = 300
        let target = Int64(6 + 250 + 2 * perWriter)
        let consumer = Task {
            var seqs: [Int64] = []
            var largest = 0
            for try await batch in service.changes(after: 0, maximumBatch: 64) {
                largest = max(largest, batch.count)
                seqs += batch.map(\.seq)
                if let last = seqs.last, last >= target { break }
            }
            return (seqs: seqs, largest: largest)
        }
        // Two threads commit while the consumer reads the backlog and then follows live events.
        try await runOnThreads(2, within: 60, "the writers") { k in
            for _ in 0..<perWriter { try service.toggle(userID: "user\(k + 2)", postID: "post\(k + 2)") }
        }
        let result = try await value(of: consumer, within: 60, "the consumer to reach seq \(target)")
        #expect(result.seqs == Array(1...target))
        #expect(result.largest <= 64)
    }

    /// A stream lives as long as its consumer: the path from the bridge's queue to its inbox stays the same length
    /// however many events it delivered (a closure held directly in a generic lock would gain a thunk per access).
    @Test(arguments: TestBackend.allCases) func aLongLivedSubscriptionsCallPathDoesNotGrowWithTheEventsItDelivers(
        on backend: TestBackend
    ) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }  // seqs 1...6
        service.settle()
        let depths = Box<[Int]>([])
        let subscription = service.bridge.subscribe(
            deliver: { _ in
                let depth = Thread.callStackReturnAddresses.count
                depths.withLock { $0.append(depth) }
            },
            rewritten: { _ in })
        defer { subscription.cancel() }
        _ = try await service.perform(Array(repeating: LikeCommand(.toggle, userID: "user2", postID: "post2"), count: 300))
        #expect(await service.waitForDelivery(through: 306, timeout: .seconds(60)))
        let seen = depths.withLock { $0 }
        #expect(seen.count == 300)
        let (least, most) = (seen.min() ?? 0, seen.max() ?? 0)
        #expect(most - least <= 8, "the delivery call stack grew from \(least) to \(most) frames over 300 events")
    }

    /// With no `ChangeFeed` started, a stream still includes another connection's (another process's) commit made
    /// while it is live: the service runs its shared watch while a stream iterates, and stops it after the last.
    @Test(arguments: TestBackend.allCases) func aStreamIncludesAnotherConnectionsCommitsByItself(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try makeService(at: location)
        let other = try FeedService(location: location)
        let head = try await service.status().lastSeq
        let first = try #require(try await other.like(userID: "user2", postID: "post1").seq)
        let (batches, batchSignal) = AsyncStream.makeStream(of: Void.self)
        let consumer = Task { () throws -> [Int64] in
            var iterator = service.changes(after: head).makeAsyncIterator()
            var seqs: [Int64] = []
            while seqs.count < 2, let batch = try await iterator.next() {
                seqs += batch.map(\.seq)
                batchSignal.yield()
            }
            return seqs
        }
        // The first batch is the backlog; the stream is live after it.
        try await receive(1, from: batches, within: 30, "the backlog")
        #expect(service.sharedWatch.isRunning)
        let second = try #require(try await other.like(userID: "user3", postID: "post1").seq)
        let seqs = try await value(of: consumer, within: 30, "the other connection's commit")
        #expect(seqs == [first, second])
        #expect(!service.sharedWatch.isRunning, "the last stream ended: the watch stops")
    }

    @Test(arguments: TestBackend.allCases) func aBurstOfFiveThousandEventsArrivesInFewBatches(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let (backlogDone, backlogSignal) = AsyncStream.makeStream(of: Void.self)
        let (burstDone, burstSignal) = AsyncStream.makeStream(of: Void.self)
        let consumer = Task {
            var iterator = service.changes(after: 0).makeAsyncIterator()
            let backlog = try await iterator.next()?.map(\.seq)
            backlogSignal.yield()
            // A slow consumer: it asks for more only once the whole burst was delivered.
            for await _ in burstDone { break }
            var calls = 0
            var seqs: [Int64] = []
            while seqs.count < 5000, let batch = try await iterator.next() {
                calls += 1
                seqs += batch.map(\.seq)
            }
            return (backlog: backlog, calls: calls, seqs: seqs)
        }
        try await receive(1, from: backlogDone, within: 20, "the backlog")
        // Ten transactions of 500 toggles each; their events reach the consumer's inbox on its bridge queue.
        try await runOnThreads(1, within: 60, "the burst") { _ in
            for _ in 0..<10 {
                _ = try service.perform(Array(repeating: LikeCommand(.toggle, userID: "user2", postID: "post2"), count: 500))
            }
        }
        #expect(await service.waitForDelivery(through: 5006, timeout: .seconds(60)))
        burstSignal.yield()
        let result = try await value(of: consumer, within: 60, "the burst to be consumed")
        #expect(result.backlog == Array(1...6))
        #expect(result.seqs == Array(7...5006))
        #expect(result.calls <= 10, "5,000 events took \(result.calls) calls of next()")
    }

    @Test(arguments: TestBackend.allCases) func cancellingTheConsumingTaskEndsIterationAndDropsTheSubscription(
        on backend: TestBackend
    ) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let iterator = service.changes(after: 0).makeAsyncIterator()
        weak let inbox = iterator.inbox
        #expect(inbox != nil)
        let consumer = Task {
            var iterator = iterator
            var batches: [[Int64]] = []
            while let batch = try await iterator.next() { batches.append(batch.map(\.seq)) }
            // Ended by cancellation: later calls return nil too.
            return (batches: batches, again: try await iterator.next())
        }
        // The consumer took the backlog and now waits for live events.
        try await waitUntil(within: 20, "the consumer to wait for live events") { inbox?.isConsumerWaiting == true }
        consumer.cancel()
        let result = try await value(of: consumer, within: 20, "the cancelled consumer to end")
        #expect(result.batches == [Array(1...6)])
        #expect(result.again == nil)
        #expect(inbox == nil, "the bridge still holds the cancelled iteration's subscription")
        // Commits go on without it.
        try await service.like(userID: "user1", postID: "post1")
    }

    @Test(arguments: TestBackend.allCases) func releasingTheIteratorDropsTheSubscription(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        weak var inbox: ChangeInbox?
        do {
            var iterator = service.changes(after: 0).makeAsyncIterator()
            #expect(try await iterator.next()?.map(\.seq) == Array(1...6))
            try await service.like(userID: "user1", postID: "post1")  // buffered by the live subscription
            inbox = iterator.inbox
            #expect(inbox != nil)
        }
        #expect(inbox == nil, "the bridge still holds a released iterator's subscription")
    }

    @Test(arguments: TestBackend.allCases) func aTaskCancelledBeforeItsFirstNextGetsNothing(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let consumer = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            var iterator = service.changes(after: 0).makeAsyncIterator()
            return try await iterator.next()
        }
        #expect(try await value(of: consumer, within: 20, "the consumer") == nil)
    }

    @Test(arguments: TestBackend.allCases) func readingPastPrunedEventsThrowsAClearError(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        #expect(try await service.pruneEvents(through: 4) == 4)
        var iterator = service.changes(after: 2).makeAsyncIterator()
        do {
            let batch = try await iterator.next()
            Issue.record("no error, got \(String(describing: batch))")
        } catch {
            #expect(error == .historyPruned(after: 2, prunedThrough: 4))
            #expect(error.category == .historyPruned)
        }
        #expect(try await iterator.next() == nil)
        // From the pruning mark on, the log is complete.
        var fromMark = service.changes(after: 4).makeAsyncIterator()
        #expect(try await fromMark.next()?.map(\.seq) == [5, 6])
    }

    @Test(arguments: TestBackend.allCases) func aGapBeforeTheBufferedEventsIsFilledFromTheLogAndRepeatsAreDropped(
        on backend: TestBackend
    ) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        // Live events come from a subject the test controls instead of the bridge.
        let live = PassthroughPublisher<EventRecord, Never>()
        let changes = FeedChanges(service: service, after: 0, maximumBatch: 100, source: live.eraseToAnyPublisher())
        var iterator = changes.makeAsyncIterator()
        #expect(try await iterator.next()?.map(\.seq) == Array(1...6))
        for _ in 0..<3 { try await service.toggle(userID: "user1", postID: "post1") }  // seqs 7, 8, 9
        let log = try await service.events()
        live.send(log[4])  // seq 5: already handed out
        live.send(log[8])  // seq 9: 7 and 8 never came live
        live.send(log[8])  // seq 9 again
        #expect(try await iterator.next()?.map(\.seq) == [7, 8])
        #expect(try await iterator.next()?.map(\.seq) == [9])
        let tenth = try await service.toggle(userID: "user1", postID: "post1")
        live.send(try #require(try await service.events(after: 9).first))
        #expect(try await iterator.next()?.map(\.seq) == [try #require(tenth.seq)])
    }

    /// A consumer that does not call `next()` while three times its inbox's capacity is committed: the inbox never
    /// holds more than its capacity, and the stream then hands out every seq once, in order, reading what the inbox
    /// dropped from the log.
    @Test(arguments: TestBackend.allCases) func aLaggingStreamHoldsAtMostItsCapacityThenYieldsEverySeqOnceInOrder(
        on backend: TestBackend
    ) async throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let logged = AsyncLog<FeedLogEvent>()
        let service = try makeService(at: location, logger: { logged.append($0) })
        defer { service.close() }
        let consumer = Task { () async throws -> (seqs: [Int64], capacity: Int, most: Int, now: Int) in
            var iterator = service.changes(after: 0).makeAsyncIterator()
            let inbox = try #require(iterator.inbox)
            let capacity = inbox.capacity
            #expect(try await iterator.next()?.map(\.seq) == Array(1...6))  // the backlog; live from here
            // Three times the capacity, while the consumer does not ask for more.
            let toggles = Array(repeating: LikeCommand(.toggle, userID: "user1", postID: "post1"), count: 1000)
            for _ in 0..<(3 * capacity / toggles.count) { _ = try await service.perform(toggles) }
            let last = Int64(6 + 3 * capacity)
            #expect(await service.waitForDelivery(through: last, timeout: .seconds(120)))
            let (most, now) = (inbox.mostBuffered, inbox.bufferedCount)
            var seqs: [Int64] = []
            while seqs.last ?? 0 < last, let batch = try await iterator.next() { seqs += batch.map(\.seq) }
            return (seqs, capacity, most, now)
        }
        let result = try await value(of: consumer, within: 240, "the lagging consumer")
        #expect(result.capacity == ChangeInbox.minimumCapacity)
        #expect(result.most <= result.capacity, "the inbox held \(result.most) events")
        #expect(result.now <= result.capacity)
        #expect(result.seqs == Array(7...Int64(6 + 3 * result.capacity)))
        let fellBehind = logged.values.filter { $0.kind == .streamFellBehind }
        #expect(fellBehind.count == 1, "one report for one fall behind: \(fellBehind)")
        #expect(fellBehind.first?.level == .warning && fellBehind.first?.fields["capacity"] == "\(result.capacity)")
    }

    /// The event that overflows a full inbox is dropped with the rest: the gap it leaves is read from the log without
    /// a later commit to wake the consumer.
    @Test(arguments: TestBackend.allCases) func aGapLeftByAnOverflowIsFilledWithoutALaterCommit(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        // Live events come from a subject the test controls instead of the bridge.
        let live = PassthroughPublisher<EventRecord, Never>()
        let changes = FeedChanges(service: service, after: 0, maximumBatch: 100, source: live.eraseToAnyPublisher(), inboxCapacity: 5)
        let consumer = Task { () async throws -> [[Int64]] in
            var iterator = changes.makeAsyncIterator()
            var batches = [try #require(try await iterator.next()).map(\.seq)]  // 1...6
            for _ in 0..<6 { try await service.toggle(userID: "user1", postID: "post1") }  // seqs 7...12
            // The sixth finds the inbox full: all six are dropped, and nothing is buffered.
            for event in try await service.events(after: 6) { live.send(event) }
            #expect(iterator.inbox?.bufferedCount == 0)
            batches.append(try #require(try await iterator.next()).map(\.seq))
            // Live events go on from there.
            let next = try #require(try await service.toggle(userID: "user1", postID: "post1").seq)
            live.send(try #require(try await service.events(after: next - 1).first))
            batches.append(try #require(try await iterator.next()).map(\.seq))
            return batches
        }
        #expect(try await value(of: consumer, within: 30, "the consumer") == [Array(1...6), Array(7...12), [13]])
    }

    @Test(arguments: TestBackend.allCases)
    func otherProcessesCommitsArriveOnceWhateverElsePublishesThem(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try makeService(at: location)
        // Another service on the same file, with its own bridge, stands in for another process.
        let other = try FeedService(location: location)
        let iterator = service.changes(after: 6).makeAsyncIterator()
        weak let inbox = iterator.inbox
        let (taken, takenSignal) = AsyncStream.makeStream(of: Void.self)
        let consumer = Task {
            var iterator = iterator
            var seqs: [Int64] = []
            while let batch = try await iterator.next() {
                seqs += batch.map(\.seq)
                if seqs.count >= 2 { takenSignal.yield() }
                if seqs.count >= 3 { break }
            }
            return seqs
        }
        try await waitUntil(within: 20, "the consumer to wait") { inbox?.isConsumerWaiting == true }
        try await other.like(userID: "user1", postID: "post1")  // seq 7
        try await other.like(userID: "user2", postID: "post1")  // seq 8
        // The stream's shared watch publishes them; publishing by hand as well repeats nothing.
        _ = try await service.publishCommittedEvents()
        try await receive(1, from: taken, within: 20, "the consumer to take 7 and 8")
        try await waitUntil(within: 20, "the consumer to wait again") { inbox?.isConsumerWaiting == true }
        // Nor does an application's own change feed beside the shared watch.
        let changeFeed = ChangeFeed(service: service)
        try changeFeed.start()
        defer { changeFeed.stop() }
        try await other.like(userID: "user3", postID: "post1")  // seq 9
        #expect(try await value(of: consumer, within: 30, "seq 9 through the change feed") == [7, 8, 9])
    }

    @Test(arguments: TestBackend.allCases) func aBadMaximumBatchThrowsOnTheFirstNext(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        var iterator = service.changes(after: 0, maximumBatch: 0).makeAsyncIterator()
        await #expect(throws: FeedError.invalidLimit(0, maximum: FeedChanges.maximumBatchLimit)) { try await iterator.next() }
        var single = service.changes(after: 0, maximumBatch: 1).makeAsyncIterator()
        #expect(try await single.next()?.map(\.seq) == [1])
        #expect(try await single.next()?.map(\.seq) == [2])
    }
}

/// Runs `body(k)` for `k` in `0..<count`, each on a thread of its own, and waits (at most `seconds`) until all
/// returned; throws the first error.
private func runOnThreads(
    _ count: Int, within seconds: Double, _ what: String, _ body: @escaping @Sendable (Int) throws -> Void
) async throws {
    let (finished, finishedSignal) = AsyncStream.makeStream(of: ThreadFailure?.self)
    for k in 0..<count {
        Thread {
            do {
                try body(k)
                finishedSignal.yield(nil)
            } catch {
                finishedSignal.yield(ThreadFailure(description: "thread \(k): \(error)"))
            }
        }.start()
    }
    try await within(seconds, what) {
        var done = 0
        for await failure in finished {
            if let failure { throw failure }
            done += 1
            if done == count { return }
        }
        throw TestTimeout(what: what)
    }
}

/// An error a thread of ``runOnThreads(_:within:_:_:)`` threw, as text.
private struct ThreadFailure: Error, CustomStringConvertible {
    let description: String
}
