import FeedSync
import FeedCore
import FeedDependencies
@testable import FeedDomain
import FeedPublishers
import FeedSQLite
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import Testing

@Suite struct AsyncAPITests {
    // MARK: - Every command and query

    @Test(arguments: TestBackend.allCases) func everyCommandAndQueryHasAnAsyncFormWithTheSameResults(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let user = try await service.createUser(id: "user4", name: "Dee")
        #expect(user.id == "user4" && user.name == "Dee")
        let post = try await service.createPost(id: "post4", authorID: "user4", body: "hello")
        #expect(post.id == "post4" && post.authorID == "user4" && post.likeCount == 0)
        let liked = try await service.like(userID: "user1", postID: "post4")
        #expect(liked.changed && liked.liked && liked.likeCount == 1)
        let unliked = try await service.unlike(userID: "user1", postID: "post4")
        #expect(unliked.changed && !unliked.liked && unliked.likeCount == 0)
        let toggled = try await service.toggle(userID: "user2", postID: "post4")
        #expect(toggled.changed && toggled.liked)
        let batch = try await service.perform([
            LikeCommand(.like, userID: "user3", postID: "post4"), LikeCommand(.like, userID: "user2", postID: "post1"),
        ])
        #expect(batch.map(\.changed) == [true, true])

        // Queries: the async form returns what the synchronous one does.
        let page = try await service.feedPage(viewerID: "user2", limit: 2)
        #expect(page == (try synchronously { try service.feedPage(viewerID: "user2", limit: 2) }))
        let next = try await service.feedPage(viewerID: "user2", before: page.nextCursor, limit: 2)
        #expect(next == (try synchronously { try service.feedPage(viewerID: "user2", before: page.nextCursor, limit: 2) }))
        let detail = try await service.post(id: "post4", viewerID: "user2")
        #expect(detail.liked)
        #expect(detail == (try synchronously { try service.post(id: "post4", viewerID: "user2") }))
        #expect(try await service.likedPostIDs(userID: "user2") == ["post1", "post4"])
        #expect(try await service.users().map(\.id) == ["user1", "user2", "user3", "user4"])
        let events = try await service.events(after: 6)
        #expect(events.map(\.kind) == [.userCreated, .postCreated, .liked, .unliked, .liked, .liked, .liked])
        #expect(try await service.events(after: 6, limit: 2) == Array(events.prefix(2)))
        let status = try await service.status()
        #expect(status == (try synchronously { try service.status() }))
        #expect(status.lastSeq == 13 && status.likes == 3)
        #expect(try await service.check().isEmpty)

        // Sync and retention.
        #expect(try await service.publishCommittedEvents() == 0)
        #expect(try await service.pruneEvents(through: 3) == 3)
        #expect(try await service.pruneEvents(olderThan: Date(timeIntervalSince1970: 1_800_000_000)) == 9)
        #expect(try await service.events().map(\.seq) == [13])
    }

    @Test func asyncSeedReportsProgressFromAPoolThread() async throws {
        let service = try FeedService(store: try FeedStore.inMemory())
        let progress = Box<[(phase: String, onPool: Bool)]>([])
        let summary = try await service.seed(SeedPlan(posts: 50, users: 10, likes: 100)) { step in
            let onPool = BlockingExecutor.currentPool === BlockingExecutor.shared
            progress.withLock { $0.append((step.phase, onPool)) }
        }
        #expect(summary == SeedSummary(users: 51, posts: 50, likes: 100))
        let steps = progress.withLock { $0 }
        #expect(Set(steps.map(\.phase)) == ["users", "posts", "likes"])
        #expect(steps.allSatisfy { $0.onPool })
        #expect(try await service.status().posts == 50)
    }

    @Test(arguments: TestBackend.allCases) func asyncErrorsAreTheSameTypedErrors(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        await #expect(throws: FeedError.postNotFound("post9")) { try await service.like(userID: "user1", postID: "post9") }
        await #expect(throws: FeedError.userAlreadyExists("user1")) { try await service.createUser(id: "user1") }
        await #expect(throws: FeedError.invalidLimit(0, maximum: FeedService.maximumPageSize)) {
            try await service.feedPage(viewerID: nil, limit: 0)
        }
        do {
            _ = try await service.post(id: "nope", viewerID: nil)
            Issue.record("no error")
        } catch {
            let typed: FeedError = error  // typed throws: no cast needed
            #expect(typed == .postNotFound("nope"))
        }
    }

    @Test(arguments: TestBackend.allCases) func asyncCommandsReturnAtCommitAndTheirEventsFollowInOrder(on backend: TestBackend) async throws
    {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let recorder = Recorder(service.bridge.changes)
        var seqs: [Int64] = []
        for _ in 0..<20 {
            let result = try await service.toggle(userID: "user1", postID: "post1")
            seqs.append(try #require(result.seq))
        }
        let created = try await service.createPost(id: "post9", authorID: "user2", body: "b")
        let last = try await service.status().lastSeq
        #expect(await service.waitForDelivery(through: last))
        #expect(recorder.values.map(\.seq).suffix(21).dropLast() == seqs[...])
        #expect(recorder.values.last?.postID == created.id)
    }

    // MARK: - Cancellation

    @Test(arguments: TestBackend.allCases) func anAsyncCallFromACancelledTaskThrowsCancelledAndWritesNothing(
        on backend: TestBackend
    ) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        let before = try await service.status()
        let attempts = Task { () -> [FeedError?] in
            withUnsafeCurrentTask { $0?.cancel() }
            var errors: [FeedError?] = []
            func attempt(_ body: () async throws(FeedError) -> Void) async {
                do {
                    try await body()
                    errors.append(nil)
                } catch {
                    errors.append(error)
                }
            }
            await attempt { () async throws(FeedError) in _ = try await service.like(userID: "user1", postID: "post1") }
            await attempt { () async throws(FeedError) in _ = try await service.createUser(id: "user9") }
            await attempt { () async throws(FeedError) in _ = try await service.createPost(id: "post9", authorID: "user1", body: "b") }
            await attempt { () async throws(FeedError) in
                _ = try await service.perform([LikeCommand(.toggle, userID: "user2", postID: "post2")])
            }
            await attempt { () async throws(FeedError) in _ = try await service.pruneEvents(through: 6) }
            await attempt { () async throws(FeedError) in _ = try await service.feedPage(viewerID: nil) }
            return errors
        }
        let errors = try await value(of: attempts, within: 20, "the cancelled task's calls")
        #expect(errors == Array(repeating: .cancelled, count: 6))
        #expect(FeedError.cancelled.category == .cancelled)
        // Nothing was written: the same counts, the same log.
        #expect(try await service.status() == before)
        #expect(try await service.events().count == 6)
    }

    /// A call whose task is cancelled while it waits for a pool thread does not start either.
    @Test func aCallCancelledWhileQueuedDoesNotStart() async throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let pool = BlockingExecutor(name: "test.queued", maximumThreads: 1)
        let gate = DispatchSemaphore(value: 0)
        defer { gate.signal() }
        let (started, startedSignal) = AsyncStream.makeStream(of: Void.self)
        let blocker = Task {
            try await pool.run { () throws(FeedError) in
                startedSignal.yield()
                _ = gate.wait(timeout: .now() + 30 * asyncTestSlack)
            }
        }
        try await receive(1, from: started, within: 20, "the blocking job to start")
        let queued = BlockingExecutor.$override.withValue(pool) {
            Task { try await service.like(userID: "user1", postID: "post1") }
        }
        try await waitUntil(within: 20, "the like to wait in the pool's queue") { pool.queuedJobs == 1 }
        queued.cancel()
        gate.signal()
        try await value(of: blocker, within: 20, "the blocking job")
        await #expect(throws: FeedError.cancelled) { try await queued.value }
        #expect(try await service.status().likes == 0)
    }

    // MARK: - The pool's size

    @Test func theServicesPoolSizeIsHonoured() async throws {
        let dir = TemporaryDirectory()
        var options = FeedOpenOptions()
        options.blockingThreads = 3
        let service = try makeService(at: dir.file("feed.sqlite"), options: options)
        #expect(service.blockingPool !== BlockingExecutor.shared)
        #expect(service.blockingPool.maximumThreads == 3)
        let shared = try makeService(at: dir.file("other.sqlite"))
        #expect(shared.blockingPool === BlockingExecutor.shared)
        // Hold delivery in a sink, so that each async waitForDelivery holds a pool thread until it is released.
        let gate = DispatchSemaphore(value: 0)
        defer { for _ in 0..<2 { gate.signal() } }
        let subscription = service.bridge.changes.sink { _ in _ = gate.wait(timeout: .now() + 30 * asyncTestSlack) }
        defer { subscription.cancel() }
        let seq = try #require(try await service.like(userID: "user1", postID: "post1").seq)
        let waits = Task {
            await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<8 { group.addTask { await service.waitForDelivery(through: seq, timeout: .seconds(60)) } }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
        }
        try await waitUntil(within: 30, "three waits running and five queued") {
            service.blockingPool.threadCount == 3 && service.blockingPool.queuedJobs == 5
        }
        gate.signal()
        #expect(try await value(of: waits, within: 60, "the waits") == Array(repeating: true, count: 8))
        #expect(service.blockingPool.mostConcurrentJobs == 3)
    }

    // MARK: - The cooperative pool stays free

    @Test func blockingBodiesRunOnDedicatedPoolThreads() async throws {
        #expect(BlockingExecutor.currentPool == nil)
        let shared = try await BlockingExecutor.shared.run { () throws(FeedError) in
            BlockingExecutor.currentPool === BlockingExecutor.shared
        }
        #expect(shared)
        let pool = BlockingExecutor(name: "test.pool", maximumThreads: 2)
        let overridden = try await BlockingExecutor.$override.withValue(pool) {
            try await BlockingExecutor.current.run { () throws(FeedError) in BlockingExecutor.currentPool === pool }
        }
        #expect(overridden)
    }

    @Test func moreBlockedCallsThanCooperativeThreadsLeaveOtherTasksRunning() async throws {
        let width = ProcessInfo.processInfo.activeProcessorCount
        let count = width + 4
        let pool = BlockingExecutor(name: "test.barrier", maximumThreads: count)
        let gate = DispatchSemaphore(value: 0)
        let (started, startedSignal) = AsyncStream.makeStream(of: Void.self)
        defer { for _ in 0..<count { gate.signal() } }  // never leave a body parked, even when the test fails
        let calls = Task {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        try await pool.run { () throws(FeedError) in
                            startedSignal.yield()
                            let onPoolThread = BlockingExecutor.currentPool === pool
                            return gate.wait(timeout: .now() + 30 * asyncTestSlack) == .success && onPoolThread
                        }
                    }
                }
                var released = 0
                for try await passed in group where passed { released += 1 }
                return released
            }
        }
        // All `count` bodies are blocked at once: more than the cooperative pool has threads.
        try await receive(count, from: started, within: 20, "\(count) blocked bodies to start")
        // Meanwhile an unrelated task runs to completion.
        let unrelated = Task {
            var total = 0
            for i in 1...100 {
                total += i
                await Task.yield()
            }
            return total
        }
        // Other suites run in parallel, and a synchronous test occupies a cooperative thread while it runs (the
        // PostgreSQL stress and fault tests for tens of seconds): the bound is wide. It still fails if these
        // blocked calls sat on cooperative threads, since they stay blocked until the unrelated task finished.
        #expect(try await value(of: unrelated, within: 120, "an unrelated task while the pool is blocked") == 5050)
        for _ in 0..<count { gate.signal() }
        #expect(try await value(of: calls, within: 30, "the released calls") == count)
    }

    @Test func asyncCommandsWaitingForAnotherConnectionsWriteLockLeaveOtherTasksRunning() async throws {
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        var options = FeedOpenOptions()
        options.busyTimeout = .seconds(60)
        let width = ProcessInfo.processInfo.activeProcessorCount
        let count = width + 4
        let service = try withDependencies {
            $0.date = .constant(Date(timeIntervalSince1970: 1_700_000_000))
        } operation: {
            let service = try FeedService(location: path, options: options)
            try service.createUser(id: "author")
            try service.createPost(id: "post1", authorID: "author", body: "b")
            for i in 0..<count { try service.createUser(id: "user\(i)") }
            return service
        }
        let holder = WriteLockHolder()
        try await holder.lock(path: path)
        defer { holder.unlock() }
        let (started, startedSignal) = AsyncStream.makeStream(of: Void.self)
        let pool = BlockingExecutor(name: "test.writers", maximumThreads: count) { startedSignal.yield() }
        let calls = BlockingExecutor.$override.withValue(pool) {
            Task {
                try await withThrowingTaskGroup(of: LikeResult.self) { group in
                    for i in 0..<count {
                        group.addTask { try await service.like(userID: "user\(i)", postID: "post1") }
                    }
                    var results: [LikeResult] = []
                    for try await result in group { results.append(result) }
                    return results
                }
            }
        }
        // Every command is on a pool thread, waiting for the write lock (in SQLite or behind the leader).
        try await receive(count, from: started, within: 20, "\(count) commands to start")
        let unrelated = Task {
            var total = 0
            for i in 1...100 {
                total += i
                await Task.yield()
            }
            return total
        }
        // Other suites run in parallel, and a synchronous test occupies a cooperative thread while it runs (the
        // PostgreSQL stress and fault tests for tens of seconds): the bound is wide. It still fails if these
        // blocked calls sat on cooperative threads, since they stay blocked until the unrelated task finished.
        #expect(try await value(of: unrelated, within: 120, "an unrelated task while commands wait") == 5050)
        // Reads are still answered (WAL readers do not wait for the writer), on the shared pool.
        let during = try await service.status()
        #expect(during.likes == 0)
        holder.unlock()
        let results = try await value(of: calls, within: 60, "the commands after the lock was released")
        #expect(results.count == count && results.allSatisfy { $0.changed })
        #expect(try await service.status().likes == count)
        #expect(try await service.check().isEmpty)
    }

    @Test func poolRunsAtMostItsThreadLimitAndQueuesTheRest() async throws {
        let pool = BlockingExecutor(name: "test.small", maximumThreads: 2)
        let gate = DispatchSemaphore(value: 0)
        let running = Box((now: 0, most: 0))
        let (started, startedSignal) = AsyncStream.makeStream(of: Void.self)
        defer { for _ in 0..<6 { gate.signal() } }
        let calls = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for i in 0..<6 {
                    group.addTask {
                        try await pool.run { () throws(FeedError) in
                            running.withLock { running in
                                running.now += 1
                                running.most = max(running.most, running.now)
                            }
                            startedSignal.yield()
                            _ = gate.wait(timeout: .now() + 30 * asyncTestSlack)
                            running.withLock { $0.now -= 1 }
                            return i
                        }
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }.sorted()
            }
        }
        try await receive(2, from: started, within: 20, "two bodies to start")
        #expect(pool.threadCount == 2)
        for _ in 0..<6 { gate.signal() }
        #expect(try await value(of: calls, within: 30, "the queued calls") == Array(0..<6))
        #expect(running.withLock { $0.most } == 2)
        #expect(pool.threadCount <= 2)
    }

    @Test func idlePoolThreadsExit() async throws {
        let pool = BlockingExecutor(name: "test.idle", maximumThreads: 3, idleTimeout: .milliseconds(20))
        async let first = pool.run { () throws(FeedError) in 1 }
        async let second = pool.run { () throws(FeedError) in 2 }
        #expect(try await first + second == 3)
        let deadline = ContinuousClock.now + .seconds(10 * asyncTestSlack)
        while pool.threadCount > 0 && ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(5))  // polling a count that changes on a timer, bounded
        }
        #expect(pool.threadCount == 0)
        #expect(try await pool.run { () throws(FeedError) in 3 } == 3)  // a new job starts a thread again
    }

    // MARK: - Codable results

    @Test(arguments: TestBackend.allCases) func feedPageAndPostDetailRoundTripThroughJSON(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try await service.like(userID: "user2", postID: "post1")
        let page = try await service.feedPage(viewerID: "user2", limit: 2)
        let last = try await service.feedPage(viewerID: nil, before: page.nextCursor, limit: 10)
        #expect(page.nextCursor != nil && last.nextCursor == nil && last.viewerID == nil)
        for value in [page, last] {
            #expect(try JSONDecoder().decode(FeedPage.self, from: JSONEncoder().encode(value)) == value)
        }
        let detail = try await service.post(id: "post1", viewerID: "user2")
        #expect(detail.liked)
        #expect(try JSONDecoder().decode(PostDetail.self, from: JSONEncoder().encode(detail)) == detail)
    }

    @Test(arguments: TestBackend.allCases) func feedPageJSONKeysAreStable(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let page = try await service.feedPage(viewerID: "user2", limit: 2)
        let cursor = try #require(page.nextCursor)
        let object = try jsonObject(page)
        #expect(Set(object.keys) == ["viewerID", "rows", "nextCursor"])
        #expect(object["viewerID"] as? String == "user2")
        #expect(object["nextCursor"] as? String == cursor.description)
        let rows = try #require(object["rows"] as? [[String: Any]])
        #expect(rows.count == 2 && Set(rows[0].keys) == ["post", "liked"])
        // The last, anonymous page has the same keys, with nulls.
        let last = try jsonObject(try await service.feedPage(viewerID: nil, before: cursor, limit: 10))
        #expect(Set(last.keys) == ["viewerID", "rows", "nextCursor"])
        #expect(last["viewerID"] is NSNull && last["nextCursor"] is NSNull)
        #expect(Set(try jsonObject(try await service.post(id: "post1", viewerID: nil)).keys) == ["post", "liked"])
    }

    @Test func aMalformedCursorFailsToDecode() throws {
        let json = Data(#"{"viewerID":null,"rows":[],"nextCursor":"not-a-cursor"}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(FeedPage.self, from: json) }
        let missing = Data(#"{"rows":[]}"#.utf8)
        #expect(try JSONDecoder().decode(FeedPage.self, from: missing) == FeedPage(viewerID: nil, rows: [], nextCursor: nil))
    }

    @Test(arguments: TestBackend.allCases) func resultModelsRoundTripThroughJSON(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let like = try await service.like(userID: "user3", postID: "post2")
        let unchanged = try await service.like(userID: "user3", postID: "post2")
        let page = try await service.feedPage(viewerID: "user3")
        let row = try #require(page.rows.first { $0.liked })
        try expectRoundTrip(row)
        try expectRoundTrip(row.post)
        try expectRoundTrip(try #require(try await service.users().first))
        try expectRoundTrip(try #require(try await service.events().last))
        try expectRoundTrip(try await service.status())
        try expectRoundTrip(like)
        try expectRoundTrip(unchanged)
    }
}

// MARK: - Helpers

/// Runs `body` in a synchronous context, so that it calls the synchronous overloads.
private func synchronously<T>(_ body: () throws -> T) rethrows -> T {
    try body()
}

private func jsonObject(_ value: some Encodable) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(value)) as? [String: Any])
}

private func expectRoundTrip<T: Codable & Equatable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let decoded = try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
    #expect(decoded == value, sourceLocation: sourceLocation)
}

/// A bounded wait in a test ran out.
struct TestTimeout: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// How much longer than its stated bound an async test waits. The suites run in parallel on two cores next to the
/// stress and fault tests' child processes and PostgreSQL server, so an async test's continuations may wait long to
/// resume. (The synchronous suites do not hold Swift's cooperative threads while they block: they run on threads
/// of their own, `.ownThreads`.) The bounds stay bounds: a real stall still fails, later.
let asyncTestSlack = 5.0

/// Runs `operation`, throwing ``TestTimeout`` (and cancelling it) when it takes more than `seconds` (× the slack).
func within<T: Sendable>(
    _ seconds: Double, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try? await Task.sleep(for: .seconds(seconds * asyncTestSlack))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw TestTimeout(what: what) }
        return value
    }
}

/// The value of `task`, cancelling the task when it takes more than `seconds`.
func value<T: Sendable>(of task: Task<T, any Error>, within seconds: Double, _ what: String) async throws -> T {
    try await within(seconds, what) {
        try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }
}

/// The value of `task`, cancelling the task when it takes more than `seconds`.
func value<T: Sendable>(of task: Task<T, Never>, within seconds: Double, _ what: String) async throws -> T {
    try await within(seconds, what) {
        await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
    }
}

/// Waits for `count` elements of `stream`, at most `seconds`.
func receive(_ count: Int, from stream: AsyncStream<Void>, within seconds: Double, _ what: String) async throws {
    try await within(seconds, what) {
        var received = 0
        for await _ in stream {
            received += 1
            if received == count { return }
        }
        throw TestTimeout(what: what)
    }
}

/// Holds SQLite's write lock on a database file from a connection of its own, on a thread of its own, until
/// ``unlock()`` (or 30 seconds at most).
final class WriteLockHolder: Sendable {
    private let release = DispatchSemaphore(value: 0)
    private let released = Box(false)

    /// Opens a connection and takes the write lock (`BEGIN IMMEDIATE`); returns once it holds it.
    func lock(path: String) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let release = release
            Thread {
                do {
                    let db = try Connection(location: .file(path))
                    try db.execute("BEGIN IMMEDIATE")
                    continuation.resume()
                    _ = release.wait(timeout: .now() + 30 * asyncTestSlack)
                    try? db.execute("ROLLBACK")
                    db.close()
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }

    /// Lets the holder roll back and close; a second call does nothing.
    func unlock() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        if first { release.signal() }
    }
}
