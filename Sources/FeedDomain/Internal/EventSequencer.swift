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
/// Delivery runs on a ``SerialDrain`` at ``DrainLevel/delivery``: whichever submitter finds no one delivering
/// delivers, outside every lock, until nothing is ready; others wait for their range unless the wait rule says
/// not to (they are themselves inside a delivery or a projection loop callback on a lower-or-equal level).
final class EventSequencer: Sendable {
    /// A batch of events handed to the delivering thread; internal so that no outside code can name it.
    struct Batch {
        let events: ArraySlice<EventRecord>
        let through: Int64
    }

    private let drain: SerialDrain<Backlog>

    /// - Parameter deliver: called with each batch of events, in seq order, on the delivering thread.
    init(deliver: @escaping @Sendable (Batch) -> Void) {
        drain = SerialDrain(level: .delivery, backlog: Backlog(), process: deliver)
    }

    /// The highest seq handed to subscribers (or being handed now); 0 before the first.
    var lastDeliveredSeq: Int64 {
        drain.withBacklog { max($0.delivered, 0) }
    }

    /// The highest seq known to the sequencer (submitted, in delivery, or delivered), or `nil` before a baseline.
    var highestKnownSeq: Int64? {
        drain.withBacklog { $0.known < 0 ? nil : $0.known }
    }

    /// Sets the seq after which delivery starts, if none was set yet.
    func setBaseline(_ seq: Int64) {
        drain.withBacklog { backlog in
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

    /// Hands over the complete range `(after, through]` of committed events.
    ///
    /// - Returns: how many of `events` were not known before (the rest overlapped earlier ranges).
    @discardableResult
    func submit(after: Int64, through: Int64, events: [EventRecord]) -> Int {
        drain.withBacklog { $0.submit(after: after, through: through, events: events) }
    }

    /// Delivers what is ready until every event up to `seq` went out, or returns early when the caller runs
    /// inside a delivery or a projection callback that must not wait (see ``SerialDrain/run(until:)``).
    ///
    /// - Returns: whether every event up to `seq` was delivered when it returned.
    @discardableResult
    func deliver(through seq: Int64) -> Bool {
        drain.run(until: seq)
    }

    // MARK: - Backlog

    struct Backlog: DrainBacklog {
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

        func isDone(_ ticket: Int64) -> Bool {
            delivered >= ticket
        }
    }
}
