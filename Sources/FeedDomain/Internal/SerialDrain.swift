internal import Foundation

/// The levels of the library's serial drains, for the wait rule of ``SerialDrain``.
///
/// A thread that is running work for a drain at level `L` (delivering events, running a projection's loop) may
/// only block waiting for drains at a *lower* level. Waits therefore always go strictly downwards, so no cycle of
/// waits — no deadlock — can form between drains. See "Threading contract" in `Docs/Architecture.md`.
enum DrainLevel: Int, Comparable {
    /// Group commit: the leader runs a batch of callers' commands in one transaction. Runs no callback; waits only
    /// for the writer connection and SQLite's file lock.
    case writer = 0
    /// The event sequencer: delivers committed events to the bridge's subscribers. Never waits on anything.
    case delivery = 1
    /// A projection's action loop: may wait for delivery (its effects' commands wait until their events went out).
    case projection = 2
    /// A durable subscriber's pass (on its queue): may wait for anything below — its handler's commands, the
    /// writer, delivery, projections. `catchUp()` waits for a pass only from a thread that may wait at this level.
    case subscriberPass = 3

    static func < (lhs: DrainLevel, rhs: DrainLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// The lowest ``DrainLevel`` the current thread is running work for, kept in thread-local storage.
enum DrainContext {
    /// The key of the thread-local slot; its value is the held level's raw value plus one, or 0 (nil) when none.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "pthread_key_create failed: \(status)")
        return key
    }()

    /// The lowest level held by the current thread, or `nil` when it runs no drain's work (a "free" thread).
    static var heldLevel: DrainLevel? {
        let raw = Int(bitPattern: pthread_getspecific(key))
        return raw == 0 ? nil : DrainLevel(rawValue: raw - 1)
    }

    /// Whether the current thread may block waiting for another thread that drains at `level`.
    static func mayWait(for level: DrainLevel) -> Bool {
        guard let held = heldLevel else { return true }
        return level < held
    }

    /// Marks the current thread as running work at `level`; returns the previous mark for ``restore(_:)``.
    static func enter(_ level: DrainLevel) -> DrainLevel? {
        let previous = heldLevel
        let lowest = previous.map { min($0, level) } ?? level
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: lowest.rawValue + 1))
        return previous
    }

    /// Restores the mark saved by ``enter(_:)``.
    static func restore(_ previous: DrainLevel?) {
        pthread_setspecific(key, previous.map { UnsafeRawPointer(bitPattern: $0.rawValue + 1) } ?? nil)
    }
}

/// What a ``SerialDrain`` runs: a backlog of work items, guarded by the drain's lock.
protocol DrainBacklog {
    /// One unit of work, handed to the drain's `process` closure outside the lock.
    associatedtype Work
    /// What a submitter waits for.
    associatedtype Ticket

    /// The next item to run, removed from the backlog, or `nil` when nothing is ready.
    mutating func next() -> Work?
    /// Records that `work` was processed.
    mutating func finish(_ work: Work)
    /// Whether everything `ticket` stands for has been processed.
    func isDone(_ ticket: Ticket) -> Bool
}

/// Runs a backlog's items one at a time, in order, on whichever thread finds no one else running them — the one
/// primitive under the event sequencer and the projections' action loops.
///
/// Any thread may add work (``withBacklog(_:)``) and then ``run(until:)``: if no thread is draining, the caller
/// becomes the drainer and processes items outside the lock until the backlog has nothing ready; if another
/// thread is draining, the caller waits for its ticket — **only when the wait rule allows it**: a thread already
/// running work for a drain at the same or a lower ``DrainLevel`` (including this drain, re-entered from its own
/// callback) does not wait; it returns `false` and the running drainer processes the item later. Because every
/// permitted wait goes to a strictly lower level and the lowest level never waits, there is no cycle of waits.
///
/// `@unchecked Sendable`: `backlog` and `drainer` are read and written only while `condition` is locked;
/// `level` and `process` are immutable.
final class SerialDrain<Backlog: DrainBacklog>: @unchecked Sendable {
    private let condition = NSCondition()
    private var backlog: Backlog
    private var drainer: pthread_t?
    private let level: DrainLevel
    private let process: (Backlog.Work) -> Void

    init(level: DrainLevel, backlog: Backlog, process: @escaping (Backlog.Work) -> Void) {
        self.level = level
        self.backlog = backlog
        self.process = process
    }

    /// Reads or changes the backlog under the lock (never call back into the drain from `body`).
    func withBacklog<Result>(_ body: (inout Backlog) throws -> Result) rethrows -> Result {
        condition.lock()
        defer { condition.unlock() }
        return try body(&backlog)
    }

    /// Processes the backlog until `ticket` is done, or returns early when waiting is not allowed.
    ///
    /// - Returns: `true` when `ticket` is done; `false` when it was left to the thread draining now (the caller
    ///   runs inside a callback of this drain, or of another drain at the same or a lower level).
    @discardableResult
    func run(until ticket: Backlog.Ticket) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while !backlog.isDone(ticket) {
            if let drainer {
                if pthread_equal(drainer, pthread_self()) != 0 || !DrainContext.mayWait(for: level) { return false }
                condition.wait()
            } else if let work = backlog.next() {
                drain(startingWith: work)
            } else {
                // Every submitter adds its work before it runs, and a backlog's unfinished tickets always have
                // ready work, so this is unreachable; returning beats waiting forever for work nobody will add.
                assertionFailure("SerialDrain: a ticket is pending but no work is ready and no thread drains")
                return false
            }
        }
        return true
    }

    /// Runs ready items outside the lock until none is left. Called and returns with `condition` locked.
    private func drain(startingWith first: Backlog.Work) {
        drainer = pthread_self()
        let previous = DrainContext.enter(level)
        var work: Backlog.Work? = first
        while let current = work {
            condition.unlock()
            process(current)
            condition.lock()
            backlog.finish(current)
            condition.broadcast()
            work = backlog.next()
        }
        DrainContext.restore(previous)
        drainer = nil
        condition.broadcast()
    }
}
