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

/// Blocking work runs on pool threads: Swift's cooperative pool stays free, and a pool keeps to its size.
extension AsyncAPITests {
    // MARK: - The cooperative pool stays free

    @Test func blockingBodiesRunOnDedicatedPoolThreads() async throws {
        // A body runs outside any task (so not on a cooperative thread), as a job of its pool.
        let pool = BlockingExecutor(name: "test.pool", maximumThreads: 1)
        let outsideTasks = try await pool.run { () throws(FeedError) in
            withUnsafeCurrentTask { $0 == nil } && pool.threadCount == 1 && pool.mostConcurrentJobs == 1
        }
        #expect(outsideTasks, "a body ran inside a task, or not as the pool's job")
        #expect(withUnsafeCurrentTask { $0 != nil })
        // A service's async calls run on the service's pool.
        var options = FeedOpenOptions()
        options.blockingThreads = 1
        let service = try FeedService(location: ":memory:", options: options)
        #expect(service.blockingPool !== BlockingExecutor.shared && service.blockingPool.mostConcurrentJobs == 0)
        _ = try await service.status()
        #expect(service.blockingPool.mostConcurrentJobs == 1)
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
                            return gate.wait(timeout: .now() + 30 * asyncTestSlack) == .success
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
        let width = ProcessInfo.processInfo.activeProcessorCount
        let count = width + 4
        var options = FeedOpenOptions()
        options.busyTimeout = .seconds(60)
        // One thread beyond the commands, for the read made while they wait.
        options.blockingThreads = count + 1
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
        let pool = service.blockingPool
        let calls = Task {
            try await withThrowingTaskGroup(of: LikeResult.self) { group in
                for i in 0..<count {
                    group.addTask { try await service.like(userID: "user\(i)", postID: "post1") }
                }
                var results: [LikeResult] = []
                for try await result in group { results.append(result) }
                return results
            }
        }
        // Every command is on a pool thread, waiting for the write lock (in SQLite or behind the leader).
        try await waitUntil(within: 20, "\(count) commands to start") { pool.mostConcurrentJobs == count }
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
        // Reads are still answered (WAL readers do not wait for the writer), on the pool's spare thread.
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
}
