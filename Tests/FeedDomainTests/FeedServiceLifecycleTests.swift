import FeedSync
import FeedCore
@testable import FeedDomain
import FeedPublishers
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import Testing

/// `run()` keeps the watch of other processes' commits going until its task is cancelled, then closes the service;
/// `close()` is idempotent and never waits for delivery; a closed service refuses commands with a typed error.
@Suite struct FeedServiceLifecycleTests {
    @Test(arguments: TestBackend.allCases)
    func whileRunRunsAnotherConnectionsCommitReachesTheBridgeAndCancellingItClosesTheService(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try makeService(at: location)
        // Another service on the same database, with its own bridge, stands in for another process.
        let other = try FeedService(location: location)
        defer { other.close() }
        let received = AsyncLog<Int64>()
        let subscription = service.bridge.changes.sink { received.append($0.seq) }
        defer { subscription.cancel() }
        let runner = Task { try await service.run() }

        // No stream iterates: only run()'s watch brings the other connection's commits in.
        let first = try #require(try await other.like(userID: "user2", postID: "post1").seq)
        try await received.wait(within: 30, "the first commit through run()'s watch") { $0.contains(first) }
        #expect(service.sharedWatch.isRunning)
        let second = try #require(try await other.like(userID: "user3", postID: "post1").seq)
        try await received.wait(within: 30, "the second commit") { $0.contains(second) }
        #expect(received.values.filter { $0 > 6 } == [first, second], "each seq once, in order")

        let cancelled = ContinuousClock.now
        runner.cancel()
        try await value(of: runner, within: 10, "run() to return after cancellation")
        let elapsed = ContinuousClock.now - cancelled
        #expect(elapsed < .seconds(10), "run() took \(elapsed) to return")
        #expect(service.isClosed)
        #expect(!service.sharedWatch.isRunning)
        // Later commands and queries fail with the typed error, synchronous and async alike.
        #expect(throws: FeedError.serviceClosed) { try synchronousLike(service) }
        await #expect(throws: FeedError.serviceClosed) { try await service.like(userID: "user1", postID: "post1") }
        await #expect(throws: FeedError.serviceClosed) { try await service.feedPage(viewerID: nil) }
        await #expect(throws: FeedError.serviceClosed) { try await service.run() }
        #expect(FeedError.serviceClosed.category == .database)
        // The other connection saw no write from the closed service.
        #expect(try await other.status().likes == 2)
    }

    @Test(arguments: TestBackend.allCases) func closeIsIdempotentAndEndsRun(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let runner = Task { try await service.run() }
        // Wait until run() holds the watch, so that close() is what ends it.
        try await waitUntil(within: 30, "run() to start its watch") { service.sharedWatch.isRunning }
        service.close()
        service.close()
        try await value(of: runner, within: 10, "run() to end after close()")
        #expect(service.isClosed)
        #expect(throws: FeedError.serviceClosed) { try service.events() }
        let subscriber = DurableSubscriber(name: "late", service: service, delivery: .atLeastOnce { _ in })
        #expect(throws: FeedError.serviceClosed) { try subscriber.catchUp() }
    }

    /// A bridge sink (on its own queue) may close the service: close() never waits for delivery.
    @Test(arguments: TestBackend.allCases) func closeFromABridgeSinkReturns(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let runner = Task { try await service.run() }
        try await waitUntil(within: 30, "run() to start its watch") { service.sharedWatch.isRunning }
        let closed = AsyncLog<Bool>()
        let subscription = service.bridge.changes.sink { _ in
            service.close()
            closed.append(service.isClosed)
        }
        defer { subscription.cancel() }
        try await service.like(userID: "user1", postID: "post1")
        try await closed.wait(within: 20, "close() called from a sink to return") { $0 == [true] }
        try await value(of: runner, within: 10, "run() to end")
    }

    @Test func anInMemoryServiceRunsWithoutAWatchUntilCancelled() async throws {
        let service = try FeedService(store: try FeedStore.inMemory())
        let runner = Task { try await service.run() }
        try await service.createUser(id: "user1")
        runner.cancel()
        try await value(of: runner, within: 10, "run() to end")
        #expect(service.isClosed)
    }

    @Test func runFromACancelledTaskClosesAtOnce() async throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let runner = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await service.run()
        }
        try await value(of: runner, within: 10, "run() in a cancelled task")
        #expect(service.isClosed)
    }
}

/// The synchronous `like`, from a synchronous context.
private func synchronousLike(_ service: FeedService) throws {
    _ = try service.like(userID: "user1", postID: "post1")
}

/// Waits, polling at each turn of the scheduler, until `condition` holds (at most `seconds`).
func waitUntil(within seconds: Double, _ what: String, _ condition: @escaping @Sendable () -> Bool) async throws {
    try await within(seconds, what) {
        while !condition() {
            try Task.checkCancellation()
            await Task.yield()
        }
    }
}

/// Values appended from any thread, and async waits for them.
final class AsyncLog<Value: Sendable>: Sendable {
    private struct State {
        var values: [Value] = []
        var waiters: [UUID: AsyncStream<Void>.Continuation] = [:]
    }

    private let state = Box(State())

    func append(_ value: Value) {
        let waiters = state.withLock { state in
            state.values.append(value)
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.yield() }
    }

    var values: [Value] { state.withLock { $0.values } }

    /// Waits until `predicate` holds for the values, at most `seconds` (× the slack); throws ``TestTimeout``.
    func wait(within seconds: Double, _ what: String, until predicate: @escaping @Sendable ([Value]) -> Bool) async throws {
        let id = UUID()
        let (changes, continuation) = AsyncStream.makeStream(of: Void.self)
        state.withLock { $0.waiters[id] = continuation }
        defer { _ = state.withLock { $0.waiters.removeValue(forKey: id) } }
        try await within(seconds, what) { [self] in
            if predicate(values) { return }
            for await _ in changes where predicate(values) { return }
            throw TestTimeout(what: what)
        }
    }
}
