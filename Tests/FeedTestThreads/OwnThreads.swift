import Foundation
public import Testing

/// Runs every test of a suite on threads of its own instead of Swift's cooperative thread pool.
///
/// Swift Testing calls a synchronous test function from a task on the cooperative pool, which has one thread per
/// core — two on the CI machines. A synchronous test that blocks (a stress test waiting for child processes, a
/// fault test waiting for a restarting server, any test waiting on a semaphore) holds one of those threads for as
/// long as it runs, and the suites run in parallel, so two such tests at once leave no thread for any async test's
/// continuations or for the `Task`s a synchronous test itself waits for. That is the "never block a thread another
/// one may be waiting for" rule broken by the test harness, and it showed as async tests taking fifty seconds and,
/// once, a bound running out in CI.
///
/// With this trait the test runs with a task-executor preference for ``ThreadPerJobExecutor``: its non-isolated code
/// — the whole body of a synchronous test — runs on a thread started for it, and the cooperative pool stays free.
/// Unstructured `Task`s a test starts do not inherit the preference and run on the pool as usual. Suites that test
/// the async API's own use of the cooperative pool do not take this trait.
public struct OwnThreadsTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @concurrent @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(ThreadPerJobExecutor.shared) {
            try await function()
        }
    }
}

extension Trait where Self == OwnThreadsTrait {
    /// Runs the suite's tests on threads of their own, off Swift's cooperative pool (see ``OwnThreadsTrait``).
    public static var ownThreads: Self { OwnThreadsTrait() }
}

/// A task executor that runs each job on a new thread, which ends with the job.
///
/// A test's synchronous body is one job, so it gets a thread to itself and may block it freely. Jobs never wait in
/// a queue behind a blocked one, so nothing run here can starve anything else run here.
public final class ThreadPerJobExecutor: TaskExecutor {
    /// The one instance; it holds no state.
    public static let shared = ThreadPerJobExecutor()

    /// Whether the calling thread is one this executor started.
    public static var isCurrent: Bool { Thread.current.threadDictionary[marker] != nil }

    private static let marker = "FeedTestThreads.ThreadPerJobExecutor"
    /// Linux keeps 15 characters of a thread's name.
    private static let threadName = "feedsync-test"

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        let thread = Thread {
            Thread.current.threadDictionary[Self.marker] = true
            job.runSynchronously(on: executor)
        }
        thread.name = Self.threadName
        thread.stackSize = 8 << 20
        thread.start()
    }
}

/// Runs a suite's tests one heavy suite at a time across the whole test run: suites that load both cores for tens of
/// seconds (floods of requests, a browser, stress tests with many processes) take turns, so that they neither starve
/// each other nor, all at once, every timing bound of the suites running beside them.
public struct HeavyTrait: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @concurrent @Sendable () async throws -> Void
    ) async throws {
        // Turns are taken around each test case only: the suite's and the function's scopes pass through, so that
        // nothing holds the turn while waiting for it again.
        guard testCase != nil else {
            try await function()
            return
        }
        await HeavyGate.shared.acquire()
        do {
            try await function()
        } catch {
            await HeavyGate.shared.release()
            throw error
        }
        await HeavyGate.shared.release()
    }
}

extension Trait where Self == HeavyTrait {
    /// Takes turns with the other heavy suites of the run (see ``HeavyTrait``).
    public static var heavy: Self { HeavyTrait() }
}

/// A process-wide turn for heavy tests: one at a time, in arrival order.
actor HeavyGate {
    static let shared = HeavyGate()
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func acquire() async {
        if !busy {
            busy = true
            return
        }
        await withCheckedContinuation { waiters.append($0) }
    }

    func release() {
        if waiters.isEmpty {
            busy = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}
