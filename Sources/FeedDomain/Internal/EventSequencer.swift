internal import FeedCore
internal import Foundation
internal import Synchronization

/// Delivers committed events in seq order, each once, whichever thread or process committed them.
///
/// Committed seqs are dense and in commit order on both backends: on SQLite `seq` is the `events` row's rowid,
/// allocated as `max + 1` by the single writer; on PostgreSQL it comes from the `event_log_head` row, whose lock an
/// event-writing transaction holds from its append (its last statement before `COMMIT`) to its commit. Pruning
/// removes only the oldest rows and keeps the newest. So a read of "every event after `s`" at one snapshot is the
/// complete set of events in `(s, last]`, and so is what a writer appended plus the gap it read from the log inside
/// its transaction. Every source hands the sequencer such a complete **range**:
///
/// - a local writer, right after `COMMIT` (on SQLite while it still holds the writer connection): its own events,
///   plus the events between the highest seq already known and its first one (other processes' and connections'
///   commits), read in the same transaction;
/// - ``FeedService/publishCommittedEvents(batchSize:)-6qi0e`` (the change feed, or an app catching up): the events
///   after the highest known seq, read on a reader connection — without the writer's lock, so a local writer
///   stuck behind another process's long transaction never holds it up.
///
/// Each new range starts at or below the highest seq known when it was read, so the union of all ranges has no
/// hole: whatever is known can always be delivered. Ranges may overlap (the change feed may read a local
/// writer's events before that writer hands them over) and may arrive out of order (two PostgreSQL transactions
/// commit at once); the sequencer delivers each seq once, in order.
///
/// A failed `COMMIT` hands over nothing, so a seq that was never committed is never marked as delivered, and the
/// next event that takes it — from this process or another — is delivered.
///
/// The hand-off runs on the bridge's own serial executor, `FeedSync.Delivery`: submitting a range schedules it and
/// returns; nobody who submits waits for it. That executor only hands each batch to `deliver` — the bridge's
/// ``DeliveryFanout``, which appends it to every subscriber's own queue — so it runs no subscriber code and reads no
/// database. ``waitForDelivery(through:timeout:)`` waits for that hand-off.
///
/// Two measured shortcuts keep the hand-off off a command's cost. With nobody listening (no subscriber, no logger)
/// and nothing in flight, a submitted range is delivered as it is handed over, on the committing thread. And a drain
/// of this process's commits that found nothing more to deliver lingers for ``lingerWindow`` before it gives the
/// executor up (not one of other processes' events, which the watch finds a wake-up at a time), so that a
/// caller's next command finds it running and wakes no thread (`feedsync-bench w4`, a sink on the bridge, release
/// build on 2 cores, 10 interleaved rounds: median 20.7k ops/s without the window, 28.3k with it, paired ratio
/// 1.24: `Docs/decisions/0008-delivery-on-its-own-executor.md`).
///
/// **Bounded memory.** Should the hand-off fall behind while commits go on, once the ranges waiting hold ``limit``
/// events further ranges keep only their bounds (merged into one range), handed on as ranges that each subscriber's
/// queue reads from the log when it gets there — when a log is attached (`logSource`; a bridge without one keeps
/// every event).
///
/// The executor is made at the first drain: a process whose commands have nobody listening (a command line's one
/// command) never needs it, and a queue that was made costs a thread when it is released (GCD runs the destructor of
/// its queue-specific value on a worker thread).
///
/// `@unchecked Sendable`: `backlog`, `recent`, `isScheduled`, `lingers` and `madeQueue` are only touched while `condition` is
/// locked; `limit`, `logSource`, `isListened` and `deliver` are immutable.
final class EventSequencer: @unchecked Sendable {
    /// A batch of events handed to the delivering thread; internal so that no outside code can name it.
    struct Batch {
        let events: ArraySlice<EventRecord>
        let through: Int64
        /// For a range kept without its events: the log's events in `(loadAfter, through]`, which each subscriber's
        /// queue reads.
        var loadAfter: Int64?
        /// The log was rewritten: no events; delivery goes on after `through`, the new log's head.
        var rewrite: HistoryRewrite?
    }

    /// Where subscribers' queues read ranges kept without their events: the attached service's log.
    struct LogSource: Sendable {
        /// The service that attached it.
        let owner: ObjectIdentifier
        /// Up to `limit` events after `after`, or `nil` when the log can no longer be read (the service closed).
        let read: @Sendable (_ after: Int64, _ limit: Int) throws -> [EventRecord]?
        /// The service's logger.
        let log: @Sendable (FeedLogEvent.Kind, FeedLogEvent.Level, String, [String: String]) -> Void
    }

    /// The most events the ranges waiting for delivery hold in memory, by default.
    static let defaultLimit = 10_000
    /// Events per read when delivery reads a range from the log.
    static let logPageSize = 1_000

    /// The most events the ranges waiting for delivery hold in memory once a log is attached.
    let limit: Int
    private let condition = NSCondition()
    private var backlog = Backlog()
    /// The last events handed over, to tell a rewritten log from the one delivered.
    private var recent = RecentEvents()
    /// Rebases so far (``epoch``); moved with `condition` locked, read without it.
    private let epochs = Atomic<UInt64>(0)
    /// The attached log, if any: only then may ranges be kept without their events.
    private let logSource: @Sendable () -> LogSource?
    /// Whether a drain of the backlog is queued or running on `queue`.
    private var isScheduled = false
    /// Whether the last range handed over was committed by this process: only then does a drain linger.
    private var lingers = false
    /// The delivery executor, once a drain was scheduled (``queue``).
    private var madeQueue: DispatchQueue?
    private let deliver: @Sendable (Batch) -> Void
    /// Whether anyone would see a delivery now (a subscriber or a logger).
    private let isListened: @Sendable () -> Bool

    /// - Parameters:
    ///   - limit: the most events held in memory for delivery once a log is attached (at least 1).
    ///   - logSource: the log attached now, if any.
    ///   - isListened: whether a delivery now would reach anyone; when it would not and nothing is in flight, a
    ///     range submitted is delivered as it is handed over, with no trip to the delivery executor.
    ///   - deliver: called with each batch of events, in seq order, on the delivery executor; it must not block.
    init(
        limit: Int = EventSequencer.defaultLimit, logSource: @escaping @Sendable () -> LogSource? = { nil },
        isListened: @escaping @Sendable () -> Bool = { true }, deliver: @escaping @Sendable (Batch) -> Void
    ) {
        self.limit = max(1, limit)
        self.logSource = logSource
        self.isListened = isListened
        self.deliver = deliver
    }

    /// The delivery executor, `FeedSync.Delivery`, made on first use.
    private var queue: DispatchQueue {
        withBacklog { _ in
            if let madeQueue { return madeQueue }
            let queue = DispatchQueue(label: "FeedSync.Delivery")
            madeQueue = queue
            return queue
        }
    }

    /// The highest seq handed to `deliver` (to every subscriber's queue); 0 before the first.
    var lastDeliveredSeq: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return max(backlog.delivered, 0)
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

    /// Hands over the complete range `(after, through]` of committed events and schedules its delivery; returns at
    /// once.
    ///
    /// - Returns: how many of `events` were not known before (the rest overlapped earlier ranges).
    @discardableResult
    func submit(after: Int64, through: Int64, events: [EventRecord]) -> Int {
        hand(through: through, events: events, committedHere: false) { backlog, limit in
            backlog.submit(after: after, through: through, events: events, limit: limit)
        }
    }

    /// Hands over the events a transaction of this process appended, once it committed (`events` in seq order);
    /// returns at once. Events committed before them and not submitted yet — other processes' — are delivered first,
    /// read from the log by each subscriber's queue unless a local writer's range brings them before it gets there.
    ///
    /// `epoch` is ``epoch`` read before the transaction began: when the log was rewritten since, the events may be
    /// the old history's, and the stretch after the highest seq known is read from the log instead.
    func submitCommitted(_ events: [EventRecord], epoch: UInt64) {
        guard let last = events.last?.seq else { return }
        guard epoch == self.epoch else {
            _ = hand(through: last, events: [], committedHere: true) { backlog, _ in backlog.submitAcrossRewrite(through: last) }
            return
        }
        _ = hand(through: last, events: events, committedHere: true) { backlog, limit in
            backlog.submitCommitted(events, limit: limit)
        }
    }

    /// How many times the log was found rewritten (``rebase(to:ifKnown:epoch:)``): a transaction reads it before it begins
    /// and hands it to ``submitCommitted(_:epoch:)``.
    var epoch: UInt64 { epochs.load(ordering: .acquiring) }

    /// Adds to the backlog with `add` (given the backlog and its limit) and schedules delivery. `committedHere`: the
    /// range is this process's commit (a caller's next command may follow at once), not one its watch found.
    ///
    /// When one of `events` has a seq that was seen as another event, the log was rewritten: delivery starts again
    /// after `through` (``rebase(to:)``) instead.
    private func hand(
        through: Int64, events: [EventRecord], committedHere: Bool, _ add: (inout Backlog, Int?) -> (added: Int, fellBehind: Bool)
    ) -> Int {
        // Asked before the lock: a subscriber that attaches meanwhile is one that attached after this commit.
        let listened = isListened()
        let source = logSource()
        var rewrite: HistoryRewrite?
        let (added, fellBehind, schedule) = withBacklog { backlog -> (Int, Bool, Bool) in
            if recent.firstDifferent(in: events) != nil {
                rewrite = backlog.rebase(to: through)
                epochs.add(1, ordering: .releasing)
                recent.removeAll()
                recent.record(events)
                defer { isScheduled = true }
                return (0, false, !isScheduled)
            }
            recent.record(events)
            let (added, fellBehind) = add(&backlog, source == nil ? nil : limit)
            lingers = committedHere
            if !listened, !isScheduled {
                // Nobody would see these events and no delivery is in flight that they must follow: they are
                // delivered here, in order, without waking the delivery executor (a command with nobody listening
                // pays no thread hand-off).
                while let batch = backlog.next() { backlog.finish(batch) }
                condition.broadcast()
                return (added, false, false)
            }
            defer { isScheduled = true }
            return (added, fellBehind, !isScheduled)
        }
        if fellBehind, let source {
            source.log(
                .deliveryFellBehind, .warning,
                "delivery fell more than \(limit) events behind; later events are read from the log when each subscriber gets there",
                ["limit": "\(limit)", "through": "\(through)"])
        }
        if let rewrite, let source { Self.logRewrite(rewrite, to: source) }
        if schedule { queue.async { self.drain() } }
        return added
    }

    /// How `event`, read from the log, compares with what this process saw at its seq.
    func match(_ event: EventRecord) -> RecentEvents.Match {
        withBacklog { _ in recent.match(event) }
    }

    /// The log was rewritten (a failover to a standby that lacked the last commits, or a restored backup): drops
    /// what waits for delivery and goes on after `head`, the new log's last seq; every subscriber's queue gets the
    /// rewrite after the old history's events and before the new ones. Does nothing and returns `nil` unless the
    /// highest seq known is still `known`, the one the caller found rewritten, and ``epoch`` is still `epoch`, read
    /// before the caller read the log: another caller may have rebased (to the same head, perhaps), or a local commit
    /// moved on, meanwhile; the next check looks again.
    @discardableResult
    func rebase(to head: Int64, ifKnown known: Int64, epoch: UInt64) -> HistoryRewrite? {
        let rewrite = withBacklog { backlog -> HistoryRewrite? in
            guard backlog.known == known, epochs.load(ordering: .acquiring) == epoch else { return nil }
            epochs.add(1, ordering: .releasing)
            recent.removeAll()
            return backlog.rebase(to: head)
        }
        guard let rewrite else { return nil }
        if let source = logSource() { Self.logRewrite(rewrite, to: source) }
        let schedule = withBacklog { _ -> Bool in
            defer { isScheduled = true }
            return !isScheduled
        }
        if schedule { queue.async { self.drain() } }
        return rewrite
    }

    private static func logRewrite(_ rewrite: HistoryRewrite, to source: LogSource) {
        source.log(
            .historyRewritten, .error,
            "the log no longer continues the history delivered through seq \(rewrite.after) (a failover or a restore): "
                + "delivery goes on after seq \(rewrite.head); subscribers must rebuild from the tables",
            ["after": "\(rewrite.after)", "head": "\(rewrite.head)"])
    }

    /// Waits until every event up to `seq` was handed to `deliver`, at most `timeout`.
    func waitForDelivery(through seq: Int64, timeout: Duration) -> Bool {
        waitForDelivery(through: seq, until: Self.deadline(after: timeout))
    }

    /// Waits until every event up to `seq` was handed to `deliver`, at most until `deadline`.
    func waitForDelivery(through seq: Int64, until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while backlog.delivered < seq {
            if !condition.wait(until: deadline) { return backlog.delivered >= seq }
        }
        return true
    }

    /// Hands ready batches to `deliver`, in seq order, until none is ready (a range still missing ends it: its
    /// submitter schedules the next drain). Runs on `queue`.
    private func drain() {
        condition.lock()
        var idleSince: ContinuousClock.Instant?
        while true {
            guard let batch = backlog.next() else {
                // Linger before giving the executor up: a caller's next command usually commits within the window,
                // and finding the drain still running it hands its range over without waking a thread (see the
                // type's notes). Not after other processes' events, which the watch finds one wake-up at a time.
                let now = ContinuousClock.now
                let since = idleSince ?? now
                idleSince = since
                guard lingers, now - since < Self.lingerWindow else { break }
                condition.unlock()
                sched_yield()
                condition.lock()
                continue
            }
            idleSince = nil
            condition.unlock()
            deliver(batch)
            condition.lock()
            backlog.finish(batch)
            condition.broadcast()
        }
        isScheduled = false
        condition.unlock()
    }

    /// How long a drain that found nothing more to deliver keeps polling for the next range before it ends.
    static let lingerWindow: Duration = .microseconds(100)

    /// The moment `timeout` from now.
    static func deadline(after timeout: Duration) -> Date {
        let (seconds, attoseconds) = max(timeout, .zero).components
        return Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
    }

    private func withBacklog<Result>(_ body: (inout Backlog) throws -> Result) rethrows -> Result {
        condition.lock()
        defer { condition.unlock() }
        return try body(&backlog)
    }
}
