internal import FeedCore
internal import Foundation

/// Hands each committed batch to every bridge subscriber's own queue; each queue calls its subscriber on an executor
/// of its own, so no subscriber waits for another.
///
/// The sequencer's delivery executor calls ``enqueue(_:)`` with the batches in seq order: it appends the batch to
/// every live queue and schedules the queues that were idle, and returns — it runs no subscriber code and reads no
/// database. Each queue drains on its own serial executor, `FeedSync.Subscriber`, in seq order, each event once.
///
/// **Bound.** A queue holds at most ``limit`` events in memory. When a batch would take it beyond (its subscriber
/// is slow), the queue keeps only the batch's range of seqs — merged with the ranges after it — and reads those
/// events from the attached log when it gets there, a page at a time: the slow subscriber still gets every event,
/// in order (``FeedLogEvent/Kind/deliveryFellBehind``). A range the sequencer kept without its events (another
/// process's commits, read nowhere yet) is read the same way, by each queue on its own executor. Without an attached
/// log (a bridge no service opened) a queue keeps every event.
///
/// **Progress.** A queue's `delivered` is the highest seq whose callback returned; a queue is *behind* while it is
/// below the highest seq handed to it. ``deliveredFloor`` — the lowest `delivered` of the queues behind — and the
/// sequencer's hand-off together answer "has every subscriber got seq s".
///
/// `@unchecked Sendable`: `state` and `source` are read and written only while `condition` is locked; `limit` and
/// `marker` are immutable.
final class DeliveryFanout: @unchecked Sendable {
    /// Unlocks a subscriber's delivery closure; internal, so code outside the module cannot call one.
    struct Key {}

    /// One subscriber's immutable parts.
    final class Subscriber: Sendable {
        let id: Int
        /// Where this subscriber's callbacks run.
        let queue: DispatchQueue
        /// Calls the subscriber with one event (it may skip events it does not publish).
        let deliver: @Sendable (Key, EventRecord) -> Void
        /// Whether anyone still listens through this queue; a queue nobody listens to is dropped.
        let isAlive: @Sendable () -> Bool
        /// Tells the subscriber that the log was rewritten, in order with its events.
        let rewritten: (@Sendable (Key, HistoryRewrite) -> Void)?
        /// Whether the subscriber takes events; one that does not only hears of rewrites.
        var wantsEvents: Bool { !onlyRewrites }
        let onlyRewrites: Bool

        init(
            id: Int, queue: DispatchQueue, deliver: @escaping @Sendable (Key, EventRecord) -> Void,
            isAlive: @escaping @Sendable () -> Bool, rewritten: (@Sendable (Key, HistoryRewrite) -> Void)?,
            onlyRewrites: Bool
        ) {
            self.onlyRewrites = onlyRewrites
            self.id = id
            self.queue = queue
            self.deliver = deliver
            self.isAlive = isAlive
            self.rewritten = rewritten
        }
    }

    /// Work waiting in a queue, in seq order.
    enum Item {
        /// Events in memory, and the seq the batch ends at.
        case events(ArraySlice<EventRecord>, through: Int64)
        /// The log's events in `(after, through]`, to be read when the queue gets there.
        case range(after: Int64, through: Int64)
        /// The log was rewritten; what follows comes after the new log's head.
        case rewrite(HistoryRewrite)
    }

    /// A queue's mutable parts.
    struct Queue {
        let subscriber: Subscriber
        var items: [Item] = []
        /// Events held in `items`.
        var buffered = 0
        /// The highest seq handed to this queue, and the highest whose callback returned.
        var handed: Int64 = 0
        var delivered: Int64 = 0
        /// Whether a drain is queued or running on the subscriber's executor.
        var isDraining = false
        /// Whether batches are being kept as ranges (and this was reported).
        var fallingBehind = false
        /// The pause before the next read of the log after a failed one.
        var retryDelay: Duration = .zero

        /// Whether `items` holds a rewrite not yet delivered.
        var hasRewrite = false
        var isBehind: Bool { delivered < handed || hasRewrite }
    }

    struct State {
        var queues: [Int: Queue] = [:]
        var nextID = 0
        /// The most events one queue ever held (for tests).
        var mostBuffered = 0
    }

    /// The most events one queue holds in memory once a log is attached.
    let limit: Int
    let condition = NSCondition()
    var state = State()
    /// Where queues read ranges kept without their events: the attached service's log.
    var source: EventSequencer.LogSource?
    /// Marks every subscriber executor of this fan-out, to recognise a wait for delivery from inside a delivery.
    let marker = DispatchSpecificKey<Bool>()

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    // MARK: - Subscribers

    /// Adds a subscriber queue; events handed over from now on reach it.
    ///
    /// - Parameters:
    ///   - label: the executor's name.
    ///   - deliver: called with each event, in seq order, on the queue's executor.
    ///   - isAlive: whether anyone still listens; checked before each hand-off, never under the lock.
    ///   - rewritten: called, in order with the events, when the log was rewritten (``HistoryRewrite``).
    ///   - onlyRewrites: the subscriber hears of rewrites only; no event is queued for it.
    func add(
        label: String = "FeedSync.Subscriber", deliver: @escaping @Sendable (Key, EventRecord) -> Void,
        isAlive: @escaping @Sendable () -> Bool, rewritten: (@Sendable (Key, HistoryRewrite) -> Void)? = nil,
        onlyRewrites: Bool = false
    ) {
        let queue = DispatchQueue(label: label)
        queue.setSpecific(key: marker, value: true)
        withState { state in
            let id = state.nextID
            state.nextID += 1
            state.queues[id] = Queue(
                subscriber: Subscriber(
                    id: id, queue: queue, deliver: deliver, isAlive: isAlive, rewritten: rewritten, onlyRewrites: onlyRewrites))
        }
    }

    /// Whether any subscriber listens now.
    var hasSubscribers: Bool {
        snapshot().contains { $0.isAlive() }
    }

    // MARK: - Hand-off

    /// Appends `batch` to every live queue and schedules the idle ones; never blocks beyond the short lock. Runs on the
    /// sequencer's delivery executor, in seq order.
    func enqueue(_ batch: EventSequencer.Batch) {
        // Asked outside the lock: it takes the subject's lock.
        let dead = Set(snapshot().filter { !$0.isAlive() }.map(\.id))
        var schedule: [Subscriber] = []
        var fellBehind: [Int] = []
        let source = withState { state -> EventSequencer.LogSource? in
            for id in dead { state.queues[id] = nil }
            for id in Array(state.queues.keys) {
                guard var queue = state.queues[id] else { continue }
                if append(batch, to: &queue) { fellBehind.append(id) }
                if !queue.isDraining, queue.isBehind {
                    queue.isDraining = true
                    schedule.append(queue.subscriber)
                }
                state.mostBuffered = max(state.mostBuffered, queue.buffered)
                state.queues[id] = queue
            }
            if !dead.isEmpty { condition.broadcast() }
            return self.source
        }
        if let source, !fellBehind.isEmpty {
            source.log(
                .deliveryFellBehind, .warning,
                "a subscriber fell more than \(limit) events behind; its later events are read from the log when it gets there",
                ["limit": "\(limit)", "through": "\(batch.through)", "subscribers": "\(fellBehind.count)"])
        }
        for subscriber in schedule {
            subscriber.queue.async { self.drain(subscriber) }
        }
    }

    /// Adds `batch` to `queue`; returns whether the queue began to keep ranges instead of events. Called locked.
    private func append(_ batch: EventSequencer.Batch, to queue: inout Queue) -> Bool {
        if let rewrite = batch.rewrite {
            // What follows starts after the new log's head, which may be below what this queue was handed.
            queue.items.append(.rewrite(rewrite))
            queue.handed = rewrite.head
            queue.hasRewrite = true
            return false
        }
        guard queue.subscriber.wantsEvents else {
            queue.handed = max(queue.handed, batch.through)
            if !queue.hasRewrite { queue.delivered = queue.handed }
            return false
        }
        defer { queue.handed = max(queue.handed, batch.through) }
        if let after = batch.loadAfter {
            appendRange(after: max(after, queue.handed), through: batch.through, to: &queue)
            return false
        }
        let events = batch.events.drop { $0.seq <= queue.handed }
        guard let first = events.first?.seq else { return false }
        if source != nil, queue.buffered + events.count > limit {
            // The batch's range starts before its first event (a queue added since the last batch has handed 0).
            appendRange(after: max(queue.handed, first - 1), through: batch.through, to: &queue)
            defer { queue.fallingBehind = true }
            return !queue.fallingBehind
        }
        queue.items.append(.events(events, through: batch.through))
        queue.buffered += events.count
        return false
    }

    /// Appends `(after, through]` as a range, merged with a range that ends where it starts.
    private func appendRange(after: Int64, through: Int64, to queue: inout Queue) {
        guard through > after else { return }
        if case .range(let start, let end)? = queue.items.last, end >= after {
            queue.items[queue.items.count - 1] = .range(after: start, through: max(end, through))
        } else {
            queue.items.append(.range(after: after, through: through))
        }
    }

    // MARK: - Progress

    /// The highest seq every queue's subscriber has had its callback return for, as far as the queues know:
    /// `Int64.max` when no queue is behind.
    var deliveredFloor: Int64 {
        withState { state in state.queues.values.lazy.filter(\.isBehind).map(\.delivered).min() ?? .max }
    }

    /// Whether the caller runs on one of this fan-out's subscriber executors (a delivery of this bridge).
    var isDelivering: Bool {
        DispatchQueue.getSpecific(key: marker) == true
    }

    /// Waits until every queue that was handed an event up to `seq` delivered it, at most until `deadline`.
    func wait(through seq: Int64, until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while state.queues.values.contains(where: { $0.delivered < min(seq, $0.handed) }) {
            if !condition.wait(until: deadline) {
                return !state.queues.values.contains { $0.delivered < min(seq, $0.handed) }
            }
        }
        return true
    }

    /// The events the queues hold in memory now, and the most one queue ever held (for tests).
    var bufferedEvents: (now: Int, most: Int) {
        withState { state in (state.queues.values.reduce(0) { $0 + $1.buffered }, state.mostBuffered) }
    }

    /// Lets queues read ranges kept without their events from `source`'s log (replacing another service's).
    func attachLog(_ source: EventSequencer.LogSource) {
        withState { _ in self.source = source }
    }

    /// Detaches the log `owner` attached, if it is the one attached: ranges not read yet are then not delivered.
    func detachLog(owner: ObjectIdentifier) {
        withState { _ in
            if source?.owner == owner { source = nil }
        }
    }

    /// The log attached now.
    var logSource: EventSequencer.LogSource? {
        withState { _ in source }
    }

    func withState<Result>(_ body: (inout State) throws -> Result) rethrows -> Result {
        condition.lock()
        defer { condition.unlock() }
        return try body(&state)
    }

    private func snapshot() -> [Subscriber] {
        withState { state in state.queues.values.map(\.subscriber) }
    }
}
