import FeedSync
import Foundation

/// Watches worker threads for a stall, so a deadlock fails a test instead of hanging it.
///
/// Each worker runs on its own `Thread` (never a task: a blocked thread cannot starve the cooperative pool) and
/// announces every step it starts with ``Worker/step(_:)``, which also counts as progress. A watching thread reads
/// the shared table every `tick`; when the total progress has not moved for `stallTimeout` while some worker is
/// still running, it writes a report of every worker's current step and how long it has been in it, and wakes
/// ``waitForWorkers()``, which returns ``Outcome/stalled(_:)`` at once — without waiting for the stuck threads.
///
/// The stuck threads then leak. Hand every object they use to ``abandon(_:)``: releasing one could block the
/// releasing thread (a subscription's `cancel()` waits for deliveries in flight on other threads), and the rest of
/// the run must not depend on them.
///
/// ```swift
/// let watchdog = Watchdog()
/// watchdog.spawn("ui-1") { worker in
///     for i in 1...300 {
///         worker.step("detail.send(.toggle) #\(i)")
///         detail.send(.toggle)
///     }
/// }
/// if case .stalled(let report) = watchdog.waitForWorkers() {
///     Issue.record(Comment(rawValue: report))
///     Watchdog.abandon([detail, service])
///     return
/// }
/// ```
///
/// `@unchecked Sendable`: every stored `var` is guarded by `condition`; the `let`s are immutable.
final class Watchdog: @unchecked Sendable {
    /// How a wait ended.
    enum Outcome: Sendable, Equatable {
        /// Every spawned worker returned.
        case finished
        /// No progress for the stall timeout (or the run exceeded its limit); the report names every worker's step.
        case stalled(String)
    }

    /// One row of the progress table, written by its worker.
    final class Worker: Sendable {
        /// The name shown in reports.
        let name: String
        private let watchdog: Watchdog
        private let index: Int

        fileprivate init(name: String, watchdog: Watchdog, index: Int) {
            self.name = name
            self.watchdog = watchdog
            self.index = index
        }

        /// Starts a step: counts one unit of progress and records what the worker does now.
        func step(_ description: String) {
            watchdog.update(index) { row in
                row.progress += 1
                row.step = description
                row.since = .now
            }
        }

        fileprivate func finish() {
            watchdog.update(index, finishing: true) { row in
                row.progress += 1
                row.step = "done"
                row.since = .now
                row.finished = true
            }
        }
    }

    fileprivate struct Row {
        let name: String
        let isThread: Bool
        var progress = 0
        var step = "not started"
        var since = ContinuousClock.Instant.now
        var started = ContinuousClock.Instant.now
        var finished = false
    }

    /// How long the total progress may stand still before the run counts as stalled.
    let stallTimeout: Duration
    /// How often the watching thread reads the table.
    let tick: Duration
    /// The longest a run may take even while it progresses (a livelock, or a run far too large).
    let limit: Duration

    private let condition = NSCondition()
    private var rows: [Row] = []
    private var running = 0
    private var outcome: Outcome?
    private var generation = 0
    private let created = ContinuousClock.Instant.now

    /// Creates a watchdog; nothing is watched until ``waitForWorkers()``.
    init(stallTimeout: Duration = .seconds(10), tick: Duration = .milliseconds(200), limit: Duration = .seconds(600)) {
        self.stallTimeout = stallTimeout
        self.tick = tick
        self.limit = limit
    }

    /// Starts `body` on a new thread named `name`, as a worker the next ``waitForWorkers()`` waits for.
    func spawn(_ name: String, _ body: @escaping @Sendable (Worker) -> Void) {
        let worker = addRow(name: name, isThread: true)
        let thread = Thread {
            // Named from inside: on Linux a name set before `start()` does not reach the thread.
            Thread.current.name = name
            let box = Unmanaged.passRetained(WorkerName(name))
            pthread_setspecific(Self.workerKey, box.toOpaque())
            body(worker)
            worker.finish()
            pthread_setspecific(Self.workerKey, nil)
            box.release()
        }
        thread.start()
    }

    /// The name of the worker running on the current thread, or `nil` on a thread ``spawn(_:_:)`` did not start.
    static var currentWorkerName: String? {
        guard let raw = pthread_getspecific(workerKey) else { return nil }
        return Unmanaged<WorkerName>.fromOpaque(raw).takeUnretainedValue().name
    }

    private static let workerKey: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// Every worker's steps and how long it ran, for a test's output once the workers finished.
    func summary() -> String {
        condition.lock()
        defer { condition.unlock() }
        return rows.map { row in
            let time = row.finished ? " in \(Self.format(row.since - row.started))" : ""
            return "\(row.name) \(row.progress) steps\(time)"
        }.joined(separator: ", ")
    }

    /// Adds a row for work that runs on other threads' time (a subscriber's callback, say): its steps count as
    /// progress and show in reports, but nobody waits for it to finish.
    func register(_ name: String) -> Worker {
        addRow(name: name, isThread: false)
    }

    /// Waits until every spawned worker has returned, or until a stall. Returns a stall at once if an earlier wait
    /// ended in one (its threads are still stuck).
    func waitForWorkers() -> Outcome {
        condition.lock()
        if case .stalled = outcome {
            defer { condition.unlock() }
            return outcome!
        }
        outcome = nil
        generation += 1
        let mine = generation
        condition.unlock()

        Thread { [self] in
            Thread.current.name = "Watchdog"
            watch(generation: mine)
        }.start()

        // Bounded even if the watching thread itself were stuck: it decides within `limit`.
        let deadline = Date().addingTimeInterval(Self.seconds(limit + stallTimeout) + 5)
        condition.lock()
        defer { condition.unlock() }
        while outcome == nil {
            if !condition.wait(until: deadline) {
                outcome = .stalled("Watchdog: its watching thread did not decide in time\n" + reportLocked(now: .now))
            }
        }
        return outcome!
    }

    // MARK: - Leaking what stuck threads hold

    private static let abandoned = AbandonedObjects()

    /// Keeps `objects` alive for the rest of the process, so no deinit of something a stuck thread uses runs (and
    /// blocks) on the caller's thread.
    static func abandon(_ objects: [any Sendable]) {
        abandoned.keep(objects)
    }

    // MARK: - Internals

    private func addRow(name: String, isThread: Bool) -> Worker {
        condition.lock()
        defer { condition.unlock() }
        rows.append(Row(name: name, isThread: isThread))
        if isThread { running += 1 }
        return Worker(name: name, watchdog: self, index: rows.count - 1)
    }

    fileprivate func update(_ index: Int, finishing: Bool = false, _ change: (inout Row) -> Void) {
        condition.lock()
        change(&rows[index])
        if finishing {
            running -= 1
            condition.broadcast()
        }
        condition.unlock()
    }

    /// The watching thread: reads the table every `tick` until the workers finished or stalled.
    private func watch(generation mine: Int) {
        let started = ContinuousClock.Instant.now
        var lastTotal = -1
        var lastChange = started
        condition.lock()
        defer { condition.unlock() }
        while outcome == nil, generation == mine {
            let now = ContinuousClock.Instant.now
            if running == 0 {
                outcome = .finished
                break
            }
            let total = rows.reduce(0) { $0 + $1.progress }
            if total != lastTotal {
                lastTotal = total
                lastChange = now
            } else if now - lastChange >= stallTimeout {
                outcome = .stalled(
                    "Watchdog: no progress for \(Self.format(now - lastChange)) (total progress \(total) steps)\n"
                        + reportLocked(now: now))
                break
            }
            if now - started >= limit {
                outcome = .stalled(
                    "Watchdog: still running after \(Self.format(limit)) although progressing (total \(total) steps)\n"
                        + reportLocked(now: now))
                break
            }
            _ = condition.wait(until: Date().addingTimeInterval(Self.seconds(tick)))
        }
        condition.broadcast()
    }

    /// Every worker's progress, step and time in it; called with `condition` locked.
    private func reportLocked(now: ContinuousClock.Instant) -> String {
        let width = rows.map(\.name.count).max() ?? 0
        var lines = ["\(rows.count) workers, \(running) still running, \(Self.format(now - created)) since the watchdog was created:"]
        for row in rows {
            let name = row.name.padding(toLength: width, withPad: " ", startingAt: 0)
            let state = row.finished ? "done" : row.isThread ? "RUNNING" : "callback"
            let progress = String(row.progress).leftPadded(to: 6)
            let step =
                row.finished ? "finished \(Self.format(now - row.since)) ago" : "in step for \(Self.format(now - row.since)): \(row.step)"
            lines.append("  \(name)  \(state.padding(toLength: 8, withPad: " ", startingAt: 0)) progress \(progress)  \(step)")
        }
        return lines.joined(separator: "\n")
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    static func format(_ duration: Duration) -> String {
        String(format: "%.1f s", seconds(duration))
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: " ", count: width - count) + self
    }
}

/// A worker's name in thread-local storage.
private final class WorkerName {
    let name: String
    init(_ name: String) { self.name = name }
}

/// What ``Watchdog/abandon(_:)`` keeps alive.
///
/// `@unchecked Sendable`: `objects` is only touched while `lock` is held.
private final class AbandonedObjects: @unchecked Sendable {
    private let lock = NSLock()
    private var objects: [any Sendable] = []

    func keep(_ more: [any Sendable]) {
        lock.lock()
        objects.append(contentsOf: more)
        lock.unlock()
    }
}
