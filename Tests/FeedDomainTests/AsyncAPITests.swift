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
        var options = FeedOpenOptions()
        options.blockingThreads = 1
        let service = try FeedService(location: ":memory:", options: options)
        let progress = Box<[(phase: String, onPool: Bool)]>([])
        let summary = try await service.seed(SeedPlan(posts: 50, users: 10, likes: 100)) { step in
            // Outside any task (not a cooperative thread), while the service's pool runs a job.
            let onPool = withUnsafeCurrentTask { $0 == nil } && service.blockingPool.mostConcurrentJobs == 1
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
        var options = FeedOpenOptions()
        options.blockingThreads = 1
        let service = try makeService(at: dir.file("feed.sqlite"), options: options)
        let pool = service.blockingPool
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
        let queued = Task { try await service.like(userID: "user1", postID: "post1") }
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
}

// MARK: - Helpers

/// Runs `body` in a synchronous context, so that it calls the synchronous overloads.
private func synchronously<T>(_ body: () throws -> T) rethrows -> T {
    try body()
}
