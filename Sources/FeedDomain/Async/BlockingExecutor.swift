internal import Foundation

/// A small pool of dedicated threads that runs the blocking work behind the async API, so that no cooperative
/// thread of Swift's concurrency runtime ever waits for SQLite, the writer connection or a delivery.
///
/// The threads are plain `Thread`s named `FeedSync.Pool`: not Dispatch's global queues (whose width is bounded
/// too, and which other code blocks as well) and not the cooperative pool. They start lazily, one per job that finds
/// no idle thread, up to ``maximumThreads``; further jobs wait in a FIFO queue. A thread that found no job for
/// ``idleTimeout`` exits, so an idle process keeps no threads; the next job starts one again.
///
/// A job runs on a pool thread that runs nothing but jobs, and may wait as an application's own thread may
/// (`Docs/Architecture.md`). A job must not wait for another job of the
/// same pool (with every thread busy, that job would never start); the library's commands and queries never do.
///
/// ```swift
/// let page = try await BlockingExecutor.shared.run { () throws(FeedError) in
///     try service.feedPage(viewerID: "user1")
/// }
/// ```
final class BlockingExecutor: Sendable {
    /// The pool the async API uses: up to 8 threads, idle ones exit after 10 seconds.
    static let shared = BlockingExecutor()

    /// ``shared`` for the default size, otherwise a pool of `threads` of its own (``FeedService/Configuration/blockingThreads``).
    static func pool(threads: Int) -> BlockingExecutor {
        threads == shared.maximumThreads ? shared : BlockingExecutor(maximumThreads: threads)
    }

    /// The most threads the pool runs at once.
    let maximumThreads: Int
    /// How long a thread waits for a job before it exits.
    let idleTimeout: Duration
    private let name: String
    private let queue = JobQueue()

    /// Creates a pool; no thread starts before the first job.
    ///
    /// - Parameters:
    ///   - name: the threads' name; at most 15 bytes (Linux ignores longer thread names).
    ///   - maximumThreads: at least 1.
    ///   - idleTimeout: how long an idle thread lives.
    init(name: String = "FeedSync.Pool", maximumThreads: Int = 8, idleTimeout: Duration = .seconds(10)) {
        self.name = name
        self.maximumThreads = max(1, maximumThreads)
        self.idleTimeout = idleTimeout
    }

    /// Runs `body` on a pool thread and returns its result; the calling task is suspended meanwhile, so its
    /// thread is free for other tasks.
    ///
    /// A task cancelled before `body` started — before the call, or while the job waited in the queue — gets
    /// ``FeedError/cancelled`` and `body` never runs. Once started, `body` runs to the end even if the task is
    /// cancelled meanwhile (a command half-done cannot be taken back), and the caller gets its result.
    ///
    /// - Parameter honouringCancellation: `false` runs `body` whatever the task's cancellation (clean-up work).
    func run<T: Sendable>(
        honouringCancellation: Bool = true, _ body: @escaping @Sendable () throws(FeedError) -> T
    ) async throws(FeedError) -> T {
        if honouringCancellation && Task.isCancelled { throw FeedError.cancelled }
        // Set when the task is cancelled; the job checks it before it starts `body`.
        let cancelled = Locked(false)
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Result<T, FeedError>, Never>) in
                submit {
                    if honouringCancellation && cancelled.withLock({ $0 }) {
                        continuation.resume(returning: .failure(.cancelled))
                    } else {
                        continuation.resume(returning: Result { () throws(FeedError) -> T in try body() })
                    }
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
        return try result.get()
    }

    /// Queues `job`; starts a thread when every running thread is busy and the pool is not full.
    func submit(_ job: @escaping @Sendable () -> Void) {
        if queue.enqueue(job, maximumThreads: maximumThreads) {
            let thread = Thread { [self] in work() }
            thread.name = name
            thread.start()
        }
    }

    /// How many threads the pool runs now (busy or idle).
    var threadCount: Int { queue.threadCount }

    /// How many jobs wait for a thread now (for tests).
    var queuedJobs: Int { queue.queuedJobs }

    /// The most jobs that ran at once so far (for tests).
    var mostConcurrentJobs: Int { queue.mostRunning }

    /// A pool thread's loop: runs jobs until none came for ``idleTimeout``.
    private func work() {
        // Named from inside too: on Linux a name set before `start()` may not reach the thread.
        Thread.current.name = name
        var first = true
        while let job = queue.next(idleTimeout: idleTimeout, first: first) {
            first = false
            job()
            queue.finished()
        }
    }
}

/// The pool's jobs and thread counts.
///
/// `@unchecked Sendable`: every stored `var` is read and written only while `condition` (an `NSCondition`, whose
/// pthread mutex ThreadSanitizer sees) is locked.
private final class JobQueue: @unchecked Sendable {
    typealias Job = @Sendable () -> Void

    private let condition = NSCondition()
    /// Queued jobs from `head` on; the slots before `head` are spent and dropped in bulk.
    private var jobs: [Job?] = []
    private var head = 0
    /// Threads alive, started but not yet looking for jobs, and waiting for a job.
    private var threads = 0
    private var starting = 0
    private var idle = 0
    /// Jobs running now, and the most that ever ran at once.
    private var running = 0
    private var most = 0

    var mostRunning: Int {
        condition.lock()
        defer { condition.unlock() }
        return most
    }

    var threadCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return threads
    }

    var queuedJobs: Int {
        condition.lock()
        defer { condition.unlock() }
        return jobs.count - head
    }

    /// Records that a job handed out by ``next(idleTimeout:first:)`` returned.
    func finished() {
        condition.lock()
        defer { condition.unlock() }
        running -= 1
    }

    /// Appends `job`; returns whether the caller must start a new thread for it (the new thread is counted already).
    func enqueue(_ job: @escaping Job, maximumThreads: Int) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        jobs.append(job)
        // Every queued job needs a thread that will look for it: an idle one, or one starting up.
        let needsThread = jobs.count - head > idle + starting && threads < maximumThreads
        if needsThread {
            threads += 1
            starting += 1
        }
        if idle > 0 { condition.signal() }
        return needsThread
    }

    /// The next job for a pool thread, waiting up to `idleTimeout` for one; `nil` when the thread should exit (it is
    /// no longer counted then). `first` is true on a new thread's first call.
    func next(idleTimeout: Duration, first: Bool) -> Job? {
        condition.lock()
        defer { condition.unlock() }
        if first { starting -= 1 }
        let seconds = Double(idleTimeout.components.seconds) + Double(idleTimeout.components.attoseconds) / 1e18
        let deadline = Date().addingTimeInterval(seconds)
        while head == jobs.count {
            idle += 1
            let signalled = condition.wait(until: deadline)
            idle -= 1
            if !signalled && head == jobs.count {
                threads -= 1
                return nil
            }
        }
        let job = jobs[head]
        jobs[head] = nil
        head += 1
        running += 1
        most = max(most, running)
        if head == jobs.count {
            jobs.removeAll(keepingCapacity: jobs.count <= 1024)
            head = 0
        } else if head >= 1024 && head * 2 >= jobs.count {
            jobs.removeFirst(head)
            head = 0
        }
        return job
    }
}
