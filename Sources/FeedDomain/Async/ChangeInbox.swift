internal import FeedCore

/// The live events a ``ChangeStream``'s subscription delivered and the consumer has not taken yet: a buffer that the
/// delivering thread only appends to, bounded by ``capacity``.
///
/// A consumer that stops calling `next()` must not make the process hold every event committed meanwhile. When the
/// buffer is full, the next event drops it — the buffered events and that event — and the inbox remembers the highest
/// seq dropped. ``take(after:limit:)`` then reports a gap through that seq, which the stream reads from the durable log
/// in pages before it hands out the events buffered since: nothing is missed or repeated, and the gap is filled even if
/// nothing is committed afterwards. The capacity is ``capacity(forMaximumBatch:)``: four of the stream's largest
/// batches, and at least ``minimumCapacity`` events.
final class ChangeInbox: Sendable {
    /// What ``take(after:limit:)`` found.
    enum Taken {
        /// Nothing newer than `after` is buffered.
        case empty
        /// The events after `after` through this seq are not buffered (they were never delivered here, or dropped
        /// when the buffer was full): read them from the log first.
        case gap(through: Int64)
        /// Contiguous events from `after + 1` on.
        case events([EventRecord])
        /// The log was rewritten: a ``HistoryRewrite`` reached the inbox (in order with the events).
        case rewritten(HistoryRewrite)
    }

    /// The fewest events an inbox holds before it drops them.
    static let minimumCapacity = 10_000

    /// The capacity of a stream's inbox: four of its largest batches, at least ``minimumCapacity``.
    static func capacity(forMaximumBatch maximumBatch: Int) -> Int {
        max(4 * maximumBatch, minimumCapacity)
    }

    private struct State {
        var events: [EventRecord] = []
        /// The highest seq dropped from a full buffer and not yet read back by the consumer.
        var droppedThrough: Int64?
        /// Whether the current fall-behind was reported (reset once the consumer read past it).
        var reported = false
        /// The most events ever buffered at once (for tests).
        var mostBuffered = 0
        /// The consumer suspended in ``waitForEvents()``.
        var waiter: CheckedContinuation<Bool, Never>?
        var cancelled = false
        /// A rewrite of the log, once one was found.
        var rewrite: HistoryRewrite?
    }

    /// The most events buffered at once; the next one drops them.
    let capacity: Int
    private let state = Locked(State())

    /// An inbox that buffers at most `capacity` events (at least 1).
    init(capacity: Int) {
        self.capacity = max(1, capacity)
    }

    /// Buffers a delivered event and wakes the consumer if it waits; never blocks beyond the short lock.
    ///
    /// - Returns: whether this event made the inbox fall behind — it dropped a full buffer — for the first time since
    ///   the consumer last caught up (the caller reports it once).
    @discardableResult
    func append(_ event: EventRecord) -> Bool {
        let (waiter, fellBehind) = state.withLock { state -> (CheckedContinuation<Bool, Never>?, Bool) in
            var fellBehind = false
            if state.rewrite != nil {
                // After a rewrite: the stream ends, and these events belong to the new history.
            } else if state.events.count >= capacity {
                // Drop the buffer and this event; the consumer reads them from the log.
                state.droppedThrough = max(state.droppedThrough ?? event.seq, event.seq)
                state.events = []
                fellBehind = !state.reported
                state.reported = true
            } else {
                state.events.append(event)
                state.mostBuffered = max(state.mostBuffered, state.events.count)
            }
            defer { state.waiter = nil }
            return (state.waiter, fellBehind)
        }
        waiter?.resume(returning: true)
        return fellBehind
    }

    /// Records that the log was rewritten (the bridge's ``EventBridge/historyRewrites``) and wakes the consumer.
    func markRewritten(_ rewrite: HistoryRewrite) {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if state.rewrite == nil { state.rewrite = rewrite }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: true)
    }

    /// Drops buffered events with `seq <= seq`.
    func discard(through seq: Int64) {
        state.withLock { state in
            if let dropped = state.droppedThrough, dropped <= seq { Self.caughtUp(&state) }
            let stale = state.events.prefix { $0.seq <= seq }.count
            if stale == state.events.count {
                state.events = []
            } else if stale > 0 {
                state.events.removeFirst(stale)
            }
        }
    }

    /// Drops events with `seq <= after`, then takes the contiguous run from `after + 1`, up to `limit` events — or
    /// reports the gap before it.
    func take(after: Int64, limit: Int) -> Taken {
        state.withLock { state in
            if let rewrite = state.rewrite { return .rewritten(rewrite) }
            if let dropped = state.droppedThrough {
                // Every event buffered now came after the dropped ones.
                if dropped > after { return .gap(through: dropped) }
                Self.caughtUp(&state)
            }
            let stale = state.events.prefix { $0.seq <= after }.count
            guard stale < state.events.count else {
                state.events = []
                return .empty
            }
            let first = state.events[stale].seq
            guard first == after + 1 else {
                if stale > 0 { state.events.removeFirst(stale) }
                return .gap(through: first - 1)
            }
            var end = stale + 1
            while end < state.events.count, end - stale < limit, state.events[end].seq == state.events[end - 1].seq + 1 {
                end += 1
            }
            if stale == 0 && end == state.events.count {
                defer { state.events = [] }
                return .events(state.events)
            }
            let batch = Array(state.events[stale..<end])
            state.events.removeFirst(end)
            return .events(batch)
        }
    }

    /// Waits until an event is buffered (or a gap must be read); returns `false` when the task was cancelled instead.
    func waitForEvents() async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let ready = state.withLock { state -> Bool? in
                    if state.cancelled { return false }
                    if !state.events.isEmpty || state.droppedThrough != nil || state.rewrite != nil { return true }
                    state.waiter = continuation
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
                state.cancelled = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: false)
        }
    }

    /// Whether the consumer is suspended waiting for live events now.
    var isConsumerWaiting: Bool { state.withLock { $0.waiter != nil } }

    /// How many events are buffered now (for tests).
    var bufferedCount: Int { state.withLock { $0.events.count } }

    /// The most events ever buffered at once (for tests): never above ``capacity``.
    var mostBuffered: Int { state.withLock { $0.mostBuffered } }

    /// The consumer read past every dropped event: a later fall-behind is reported again.
    private static func caughtUp(_ state: inout State) {
        state.droppedThrough = nil
        state.reported = false
    }
}
