internal import FeedCore
internal import Foundation

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
/// - ``FeedService/publishCommittedEvents(batchSize:)`` (the change feed, or an app catching up): the events
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
/// Delivery runs on the bridge's own serial executor, `FeedSync.Delivery`: submitting a range schedules it and
/// returns; nobody who submits waits for it. ``waitForDelivery(through:timeout:)`` is how anyone else waits for
/// events to have reached every subscriber.
///
/// Two measured shortcuts keep the hand-off off a command's cost. With nobody listening (no subscriber, no logger)
/// and nothing in flight, a submitted range is delivered as it is handed over, on the committing thread. And a drain
/// of this process's commits that found nothing more to deliver lingers for ``lingerWindow`` before it gives the
/// executor up (not one of other processes' events, which the watch finds a wake-up at a time), so that a
/// caller's next command finds it running and wakes no thread (`feedsync-bench w4`, a sink on the bridge, release
/// build on 2 cores, interleaved, median of 5: 19.6k ops/s without the window, 23.4k with it; delivering on the
/// committing thread instead of an executor, 24.5k: `Docs/decisions/0008-delivery-on-its-own-executor.md`).
///
/// **Bounded memory.** A slow subscriber holds the delivering thread while commits go on. Once the ranges waiting
/// hold ``limit`` events, further ranges keep only their bounds (merged into one range), and the delivering thread
/// reads their events from the log, a page at a time, when it gets there — through the service that attached its log
/// (``attachLog(_:)``; a bridge without one keeps every event). A read that fails is tried again after a pause that
/// doubles from 10 ms to 2 s; events pruned before delivery read them are not delivered (and logged). The delivering
/// thread waits for those reads, never for a command.
///
/// The executor is made at the first drain: a process whose commands have nobody listening (a command line's one
/// command) never needs it, and a queue that was made costs a thread when it is released (GCD runs the destructor of
/// its queue-specific value on a worker thread).
///
/// `@unchecked Sendable`: `backlog`, `isScheduled`, `lingers`, `logSource`, `retryDelay` and `madeQueue` are only
/// touched while `condition` is locked; `limit` and `deliver` are immutable.
final class EventSequencer: @unchecked Sendable {
    /// A batch of events handed to the delivering thread; internal so that no outside code can name it.
    struct Batch {
        let events: ArraySlice<EventRecord>
        let through: Int64
        /// For a range kept without its events: deliver the log's events in `(loadAfter, through]`.
        var loadAfter: Int64?
    }

    /// Where the delivering thread reads ranges kept without their events: the attached service's log.
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
    private var logSource: LogSource?
    /// The pause before the next read of the log after a failed one; zero after one that succeeded.
    private var retryDelay: Duration = .zero
    /// Whether a drain of the backlog is queued or running on `queue`.
    private var isScheduled = false
    /// Whether the last range handed over was committed by this process: only then does a drain linger.
    private var lingers = false
    /// The delivery executor, once a drain was scheduled (``queue``).
    private var madeQueue: DispatchQueue?
    /// Marks `queue` (GCD's queue-specific data), to recognise a wait for delivery from inside a delivery.
    private let ownQueue = DispatchSpecificKey<Bool>()
    private let deliver: @Sendable (Batch) -> Void
    /// Whether anyone would see a delivery now (a subscriber or a logger).
    private let isListened: @Sendable () -> Bool

    /// - Parameters:
    ///   - limit: the most events held in memory for delivery once a log is attached (at least 1).
    ///   - isListened: whether a delivery now would reach anyone; when it would not and nothing is in flight, a
    ///     range submitted is delivered as it is handed over, with no trip to the delivery executor.
    ///   - deliver: called with each batch of events, in seq order, on the delivery executor.
    init(
        limit: Int = EventSequencer.defaultLimit, isListened: @escaping @Sendable () -> Bool = { true },
        deliver: @escaping @Sendable (Batch) -> Void
    ) {
        self.limit = max(1, limit)
        self.isListened = isListened
        self.deliver = deliver
    }

    /// The delivery executor, `FeedSync.Delivery`, made on first use.
    private var queue: DispatchQueue {
        withBacklog { _ in
            if let madeQueue { return madeQueue }
            let queue = DispatchQueue(label: "FeedSync.Delivery")
            queue.setSpecific(key: ownQueue, value: true)
            madeQueue = queue
            return queue
        }
    }

    /// Lets delivery read from `source`'s log the ranges it keeps without their events (replacing another service's).
    func attachLog(_ source: LogSource) {
        condition.lock()
        defer { condition.unlock() }
        logSource = source
    }

    /// Detaches the log `owner` attached, if it is the one attached; ranges kept without their events are then not
    /// delivered. Returns at once.
    func detachLog(owner: ObjectIdentifier) {
        let schedule = withBacklog { backlog -> Bool in
            guard logSource?.owner == owner else { return false }
            logSource = nil
            // A drain settles the ranges kept without their events, which are no longer read; with no range
            // waiting there is nothing to settle.
            guard !isScheduled, !backlog.ranges.isEmpty else { return false }
            isScheduled = true
            return true
        }
        if schedule { queue.async { self.drain() } }
    }

    /// The events held in memory for delivery now, and the most ever held at once (for tests).
    var bufferedEvents: (now: Int, most: Int) {
        withBacklog { ($0.buffered, $0.mostBuffered) }
    }

    /// The highest seq every subscriber's callback has returned for (so every projection has applied it); 0 before
    /// the first.
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
        hand(through: through, committedHere: false) { backlog, limit in
            backlog.submit(after: after, through: through, events: events, limit: limit)
        }
    }

    /// Hands over the events a transaction of this process appended, once it committed (`events` in seq order);
    /// returns at once. Events committed before them and not submitted yet — other processes' — are delivered first,
    /// read from the log by the delivering thread unless a local writer's range brings them before it gets there.
    func submitCommitted(_ events: [EventRecord]) {
        guard let last = events.last?.seq else { return }
        _ = hand(through: last, committedHere: true) { backlog, limit in backlog.submitCommitted(events, limit: limit) }
    }

    /// Adds to the backlog with `add` (given the backlog and its limit) and schedules delivery. `committedHere`: the
    /// range is this process's commit (a caller's next command may follow at once), not one its watch found.
    private func hand(
        through: Int64, committedHere: Bool, _ add: (inout Backlog, Int?) -> (added: Int, fellBehind: Bool)
    ) -> Int {
        // Asked before the lock: a subscriber that attaches meanwhile is one that attached after this commit.
        let listened = isListened()
        let (added, fellBehind, schedule, source) = withBacklog { backlog -> (Int, Bool, Bool, LogSource?) in
            let (added, fellBehind) = add(&backlog, logSource == nil ? nil : limit)
            lingers = committedHere
            if !listened, !isScheduled {
                // Nobody would see these events and no delivery is in flight that they must follow: they are
                // delivered here, in order, without waking the delivery executor (a command with nobody listening
                // pays no thread hand-off).
                while let batch = backlog.next() { backlog.finish(through: batch.through) }
                condition.broadcast()
                return (added, false, false, nil)
            }
            defer { isScheduled = true }
            return (added, fellBehind, !isScheduled, logSource)
        }
        if fellBehind, let source {
            source.log(
                .deliveryFellBehind, .warning,
                "delivery fell more than \(limit) events behind (a slow subscriber); later events are read from the log when delivery gets there",
                ["limit": "\(limit)", "through": "\(through)"])
        }
        if schedule { queue.async { self.drain() } }
        return added
    }

    /// Waits until every subscriber's callback has returned for every event up to `seq`, at most `timeout`.
    ///
    /// - Returns: whether they had. Inside a delivery (a bridge subscriber's callback, or what it runs) the answer
    ///   comes at once: waiting there would wait for itself.
    func waitForDelivery(through seq: Int64, timeout: Duration) -> Bool {
        guard DispatchQueue.getSpecific(key: ownQueue) != true else { return lastDeliveredSeq >= seq }
        let (seconds, attoseconds) = max(timeout, .zero).components
        let deadline = Date(timeIntervalSinceNow: Double(seconds) + Double(attoseconds) / 1e18)
        condition.lock()
        defer { condition.unlock() }
        while backlog.delivered < seq {
            if !condition.wait(until: deadline) { return backlog.delivered >= seq }
        }
        return true
    }

    /// Delivers ready batches, in seq order, until none is ready (a range still missing ends it: its submitter
    /// schedules the next drain). A range kept without its events is read from the log; when a read fails, the rest
    /// of it goes back and the drain starts again after a pause. Runs on `queue`.
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
            let source = logSource
            condition.unlock()
            if let after = batch.loadAfter {
                if case .failed(let delivered, let error) = load(after: after, through: batch.through, from: source) {
                    let delay = withBacklog { backlog -> Duration in
                        backlog.requeue(after: delivered, through: batch.through)
                        retryDelay = min(max(retryDelay * 2, .milliseconds(10)), .seconds(2))
                        return retryDelay
                    }
                    source?.log(
                        .deliveryReadFailed, .warning, "delivery could not read events from the log and retries: \(error)",
                        ["error": error.description, "retryMilliseconds": "\(FeedService.milliseconds(delay))"])
                    // `isScheduled` stays set: this retry is the drain that submitters would otherwise schedule.
                    queue.asyncAfter(deadline: .now() + .milliseconds(Int(FeedService.milliseconds(delay)))) { self.drain() }
                    return
                }
            } else {
                deliver(batch)
            }
            condition.lock()
            backlog.finish(through: batch.through)
            condition.broadcast()
        }
        isScheduled = false
        condition.unlock()
    }

    /// How long a drain that found nothing more to deliver keeps polling for the next range before it ends.
    static let lingerWindow: Duration = .microseconds(100)

    /// How reading a range from the log ended.
    private enum LoadOutcome {
        case done
        /// A read failed; everything up to `delivered` was delivered.
        case failed(delivered: Int64, FeedError)
    }

    /// Delivers the log's events in `(after, through]`, a page at a time, recording progress after each page.
    private func load(after: Int64, through: Int64, from source: LogSource?) -> LoadOutcome {
        guard let source else { return .done }  // the service closed: these events are not delivered
        var cursor = after
        while cursor < through {
            let page: [EventRecord]
            do {
                guard let read = try source.read(cursor, Int(min(Int64(Self.logPageSize), through - cursor))) else { return .done }
                page = read
            } catch {
                return .failed(delivered: cursor, FeedError.wrap(error))
            }
            let events = page.prefix { $0.seq <= through }
            let first = events.first?.seq ?? through + 1
            if first > cursor + 1 {
                source.log(
                    .deliveryMissedPruned, .error,
                    "events \(cursor + 1) through \(first - 1) were pruned from the log before delivery read them; subscribers do not get them",
                    ["from": "\(cursor + 1)", "through": "\(first - 1)"])
            }
            guard let last = events.last?.seq else { break }
            deliver(Batch(events: events, through: last))
            withBacklog { backlog in
                backlog.finish(through: last)
                retryDelay = .zero
                condition.broadcast()
            }
            cursor = events.count < page.count ? through : last
        }
        return .done
    }

    private func withBacklog<Result>(_ body: (inout Backlog) throws -> Result) rethrows -> Result {
        condition.lock()
        defer { condition.unlock() }
        return try body(&backlog)
    }
}
