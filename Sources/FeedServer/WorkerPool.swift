internal import Foundation

/// The bounded pool of threads that run everything that waits for the database (`Docs/HTTP.md`, "Threads and who
/// waits on whom").
///
/// An I/O thread hands a job over with ``submit(_:)`` and never waits: when `queueLimit` jobs are waiting already the
/// call returns `false` at once and the request is answered 503. A job never waits for an I/O thread or for another
/// job. ``shutdown(until:)`` refuses new jobs, runs the queued ones with `stopping` set (they answer 503 at once), and
/// waits for the running ones.
///
/// `@unchecked Sendable`: every stored `var` is read and written only with `condition` locked.
final class WorkerPool: @unchecked Sendable {
    /// One job: `stopping` is true when it runs during shutdown and should only answer "unavailable".
    typealias Job = @Sendable (_ stopping: Bool) -> Void

    private struct Entry {
        let job: Job
        let queued: ContinuousClock.Instant
    }

    private let condition = NSCondition()
    private var queue: [Entry?] = []
    private var head = 0
    private var running = 0
    private var threadsAlive = 0
    private var stopping = false
    private let queueLimit: Int
    private let metrics: ServerMetrics

    /// Starts `threads` threads.
    init(threads: Int, queueLimit: Int, metrics: ServerMetrics) {
        self.queueLimit = queueLimit
        self.metrics = metrics
        threadsAlive = threads
        for index in 0..<threads {
            let thread = Thread { [self] in work() }
            thread.name = "feedsync-worker-\(index)"
            thread.stackSize = 1 << 20
            thread.start()
        }
    }

    /// Queues `job`; `false` when the queue is full or the pool stops (the caller answers 503).
    func submit(_ job: @escaping Job) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !stopping, queue.count - head < queueLimit else { return false }
        queue.append(Entry(job: job, queued: .now))
        metrics.queuedJobs.add(1)
        condition.signal()
        return true
    }

    /// Refuses new jobs, lets the queued ones answer as stopping, and waits until none runs or `deadline` passes.
    /// - Returns: whether every job finished.
    func shutdown(until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        stopping = true
        condition.broadcast()
        while threadsAlive > 0 {
            if !condition.wait(until: deadline) { return threadsAlive == 0 }
        }
        return true
    }

    private func work() {
        while true {
            condition.lock()
            while head == queue.count, !stopping { condition.wait() }
            guard head < queue.count, let entry = queue[head] else {
                // Stopping and nothing queued: this thread ends.
                threadsAlive -= 1
                condition.broadcast()
                condition.unlock()
                return
            }
            queue[head] = nil
            head += 1
            if head > 1024, head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
            running += 1
            let isStopping = stopping
            condition.unlock()

            metrics.queuedJobs.add(-1)
            metrics.busyWorkers.add(1)
            let started = ContinuousClock.now
            metrics.workerWait.observe(Self.seconds(started - entry.queued))
            entry.job(isStopping)
            metrics.databaseCall.observe(Self.seconds(.now - started))
            metrics.busyWorkers.add(-1)

            condition.lock()
            running -= 1
            condition.unlock()
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        let parts = duration.components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
