internal import FeedCore
internal import Foundation

/// Delivers committed events in seq order, each once, whichever thread or process committed them.
///
/// Committed seqs are dense: `seq` is the `events` row's rowid, allocated as `max + 1` inside the writing
/// transaction, and pruning removes only the oldest rows and keeps the newest. So a read of "every event after
/// `s`" at one snapshot is the complete set of events in `(s, last]`, and so is what a writer appended plus the
/// gap it read from the log inside its transaction. Every source hands the sequencer such a complete **range**:
///
/// - a local writer, after `COMMIT` but before it releases the writer connection: its own events, plus the
///   events between the highest seq already known and its first one (other processes' commits), read in the
///   same transaction;
/// - ``FeedService/publishCommittedEvents(batchSize:)`` (the change feed, or an app catching up): the events
///   after the highest known seq, read on a reader connection — without the writer's lock, so a local writer
///   stuck behind another process's long transaction never holds it up.
///
/// Each new range starts at or below the highest seq known when it was read, so the union of all ranges has no
/// hole: whatever is known can always be delivered. Ranges may overlap (the change feed may read a local
/// writer's events before that writer hands them over); the sequencer delivers each seq once, in order.
///
/// A failed `COMMIT` hands over nothing, so a seq that was never committed is never marked as delivered, and the
/// next event that takes it — from this process or another — is delivered.
///
/// Delivery runs on the bridge's own serial executor, `FeedSync.Delivery` (a ``FeedExecutor``): submitting a range
/// schedules it and returns; nobody who submits waits for it. ``waitForDelivery(through:timeout:)`` is how a caller
/// off the executors waits for its events to have reached every subscriber.
///
/// Two measured shortcuts keep the hand-off off a command's cost. With nobody listening (no subscriber, no logger)
/// and nothing in flight, a submitted range is delivered as it is handed over, on the committing thread. And a drain
/// that found nothing more to deliver lingers for ``lingerWindow`` before it gives the executor up, so that a
/// caller's next command finds it running and wakes no thread (W4, a sink on the bridge, release build on 2 cores,
/// interleaved, median of 5: 19.6k ops/s without the window, 23.4k with it; before delivery left the committing
/// thread, 24.5k).
///
/// `@unchecked Sendable`: `backlog` and `isScheduled` are only touched while `condition` is locked; `queue` and
/// `deliver` are immutable.
final class EventSequencer: @unchecked Sendable {
    /// A batch of events handed to the delivering thread; internal so that no outside code can name it.
    struct Batch {
        let events: ArraySlice<EventRecord>
        let through: Int64
    }

    private let condition = NSCondition()
    private var backlog = Backlog()
    /// Events handed to projections that have not applied them yet, oldest first: `(seq, projections still to
    /// apply it)`. Seqs are appended in delivery order, so the first entry is the oldest outstanding one.
    private var outstanding: [(seq: Int64, count: Int)] = []
    /// Whether a drain of the backlog is queued or running on `queue`.
    private var isScheduled = false
    private let queue = FeedExecutor.makeQueue(label: "FeedSync.Delivery")
    private let deliver: @Sendable (Batch) -> Void
    /// Whether anyone would see a delivery now (a subscriber or a logger).
    private let isListened: @Sendable () -> Bool

    /// - Parameters:
    ///   - isListened: whether a delivery now would reach anyone; when it would not and nothing is in flight, a
    ///     range submitted is delivered as it is handed over, with no trip to the delivery executor.
    ///   - deliver: called with each batch of events, in seq order, on the delivery executor.
    init(isListened: @escaping @Sendable () -> Bool = { true }, deliver: @escaping @Sendable (Batch) -> Void) {
        self.isListened = isListened
        self.deliver = deliver
    }

    /// The highest seq every subscriber's callback has returned for and every projection has applied; 0 before the
    /// first.
    var lastDeliveredSeq: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return max(settledSeq, 0)
    }

    /// The highest seq delivered and applied by every projection (under `condition`).
    private var settledSeq: Int64 {
        guard let oldest = outstanding.first else { return backlog.delivered }
        return min(backlog.delivered, oldest.seq - 1)
    }

    /// Records that a projection was handed the event `seq` to apply on its own queue; ``applied(_:)`` follows.
    /// Called on the delivery executor, in seq order.
    func applying(_ seq: Int64) {
        condition.lock()
        defer { condition.unlock() }
        if let last = outstanding.last, last.seq == seq {
            outstanding[outstanding.count - 1].count += 1
        } else {
            outstanding.append((seq, 1))
        }
    }

    /// Records that a projection applied the event `seq` handed to it with ``applying(_:)``.
    func applied(_ seq: Int64) {
        condition.lock()
        defer { condition.unlock() }
        guard let index = outstanding.firstIndex(where: { $0.seq == seq }) else { return }
        outstanding[index].count -= 1
        var settled = false
        while let first = outstanding.first, first.count == 0 {
            outstanding.removeFirst()
            settled = true
        }
        if settled { condition.broadcast() }
    }

    /// The highest seq known to the sequencer (submitted, in delivery, or delivered), or `nil` before a baseline.
    var highestKnownSeq: Int64? {
        withBacklog { $0.known < 0 ? nil : $0.known }
    }

    /// Sets the seq after which delivery starts, if none was set yet.
    func setBaseline(_ seq: Int64) {
        withBacklog { backlog in
            guard backlog.known < 0 else { return }
            backlog.known = seq
            backlog.taken = seq
            backlog.delivered = seq
        }
    }

    /// Completes a writer's range inside its transaction: when other processes committed since the highest seq
    /// known here, reads their events from the log and puts them before `events`.
    ///
    /// - Returns: the seq the range starts after, or `nil` when `events` is empty.
    func completeRange(_ events: inout [EventRecord], in tx: any FeedTransaction) throws -> Int64? {
        guard let first = events.first?.seq else { return nil }
        let after = first - 1
        guard let known = highestKnownSeq, known < after else { return after }
        events.insert(contentsOf: try tx.events(after: known, limit: Int(after - known)), at: 0)
        return known
    }

    /// Hands over the complete range `(after, through]` of committed events and schedules its delivery; returns at
    /// once.
    ///
    /// - Returns: how many of `events` were not known before (the rest overlapped earlier ranges).
    @discardableResult
    func submit(after: Int64, through: Int64, events: [EventRecord]) -> Int {
        // Asked before the lock: a subscriber that attaches meanwhile is one that attached after this commit.
        let listened = isListened()
        let (added, schedule) = withBacklog { backlog -> (Int, Bool) in
            let added = backlog.submit(after: after, through: through, events: events)
            if !listened, !isScheduled, outstanding.isEmpty {
                // Nobody would see these events and no delivery is in flight that they must follow: they are
                // delivered here, in order, without waking the delivery executor (a command with nobody listening
                // pays no thread hand-off).
                while let batch = backlog.next() { backlog.finish(batch) }
                condition.broadcast()
                return (added, false)
            }
            defer { isScheduled = true }
            return (added, !isScheduled)
        }
        if schedule { queue.async { self.drain() } }
        return added
    }

    /// Waits until every subscriber's callback has returned for every event up to `seq`, at most `timeout`.
    ///
    /// - Returns: whether they had; `false` at once on one of the library's executors (inside a callback), where
    ///   waiting for delivery could wait for itself.
    func waitForDelivery(through seq: Int64, timeout: Duration) -> Bool {
        guard !FeedExecutor.isCurrent else { return lastDeliveredSeq >= seq }
        let (seconds, attoseconds) = max(timeout, .zero).components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        while settledSeq < seq {
            if !condition.wait(until: deadline) { return settledSeq >= seq }
        }
        return true
    }

    /// Delivers ready batches, in seq order, until none is ready (a range still missing ends it: its submitter
    /// schedules the next drain). Runs on `queue`.
    private func drain() {
        condition.lock()
        var idleSince: ContinuousClock.Instant?
        while true {
            if let batch = backlog.next() {
                condition.unlock()
                deliver(batch)
                condition.lock()
                backlog.finish(batch)
                condition.broadcast()
                idleSince = nil
                continue
            }
            // Linger before giving the executor up: a caller's next command usually commits within the window, and
            // finding the drain still running it hands its range over without waking a thread (see the type's notes).
            let now = ContinuousClock.now
            let since = idleSince ?? now
            idleSince = since
            guard now - since < Self.lingerWindow else { break }
            condition.unlock()
            sched_yield()
            condition.lock()
        }
        isScheduled = false
        condition.unlock()
    }

    /// How long a drain that found nothing more to deliver keeps polling for the next range before it ends.
    static let lingerWindow: Duration = .microseconds(100)

    private func withBacklog<Result>(_ body: (inout Backlog) throws -> Result) rethrows -> Result {
        condition.lock()
        defer { condition.unlock() }
        return try body(&backlog)
    }

    // MARK: - Backlog

    struct Backlog {
        struct Range {
            let after: Int64
            let through: Int64
            let events: [EventRecord]
        }

        /// The highest seq delivered (every callback for it returned).
        var delivered: Int64 = -1
        /// The highest seq handed to the delivering thread.
        var taken: Int64 = -1
        /// The highest seq of any range submitted.
        var known: Int64 = -1
        /// Ranges not yet handed over, in submission order (a handful at most: one per concurrent writer).
        var ranges: [Range] = []

        mutating func submit(after: Int64, through: Int64, events: [EventRecord]) -> Int {
            // Ranges may arrive out of commit order when several connections commit at once (PostgreSQL): a range
            // at or below what was handed to the delivering thread is old news; any other is kept until `next()`
            // reaches it.
            guard through > taken else { return 0 }
            let previous = known
            ranges.append(Range(after: after, through: through, events: events))
            known = max(known, through)
            return events.count - (events.firstIndex { $0.seq > previous } ?? events.count)
        }

        mutating func next() -> Batch? {
            ranges.removeAll { $0.through <= taken }
            guard let index = ranges.firstIndex(where: { $0.after <= taken }) else { return nil }
            let range = ranges.remove(at: index)
            let start = range.events.firstIndex { $0.seq > taken } ?? range.events.endIndex
            taken = range.through
            return Batch(events: range.events[start...], through: range.through)
        }

        mutating func finish(_ work: Batch) {
            if work.through > delivered { delivered = work.through }
        }
    }
}
