internal import FeedPublishers
// The one import of the domain's models in the change stream (`EventRecord` moves to `FeedCore`).
public import FeedCore

extension FeedService {
    /// The changes after `seq` as an `AsyncSequence` of batches: the backlog from the log, then live events, each
    /// seq exactly once, in order, with no gap.
    ///
    /// Iteration subscribes to ``bridge``'s ``EventBridge/changes`` first, buffering what it delivers, then reads the
    /// log after `seq` in pages of `maximumBatch` (on the blocking pool, like every async query), then hands out
    /// the buffered live events. Every `next()` returns everything already buffered, up to `maximumBatch` events, so
    /// a consumer that falls behind catches up in a few large batches.
    ///
    /// Live events include other processes' and machines' commits: while any stream of the service iterates, the
    /// service runs one watch of the database for all of them (a ``ChangeFeed`` of its own, stopped without waiting
    /// when the last stream ends).
    ///
    /// ```swift
    /// for try await batch in service.changes(after: lastSeenSeq) {
    ///     try await send(batch)                      // e.g. one server-sent event per batch
    ///     lastSeenSeq = batch[batch.count - 1].seq
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - seq: hand out events with a greater seq; 0 for the whole log. A negative value counts as 0.
    ///   - maximumBatch: the largest batch, 1 to ``FeedChanges/maximumBatchLimit``; a value outside that range
    ///     makes the first `next()` throw ``FeedError/invalidLimit(_:maximum:)``.
    /// - Returns: a sequence; nothing happens until it is iterated.
    public func changes(after seq: Int64, maximumBatch: Int = 1000) -> FeedChanges {
        FeedChanges(service: self, after: seq, maximumBatch: maximumBatch, source: bridge.changes)
    }
}

/// The changes after a seq, as non-empty batches of events in seq order: the backlog, then live events.
///
/// Made by ``FeedService/changes(after:maximumBatch:)``, whose documentation has the details. Each iterator is
/// independent: it subscribes on its first `next()` and ends its subscription when the iteration ends, when the
/// task iterating it is cancelled (`next()` then returns `nil`), or when the iterator is released.
///
/// ```swift
/// var iterator = service.changes(after: 0).makeAsyncIterator()
/// while let batch = try await iterator.next() { print(batch.map(\.seq)) }
/// ```
///
/// Errors: ``FeedError/historyPruned(after:prunedThrough:)`` when events the consumer still needs were pruned from
/// the log (it must rebuild from the tables), ``FeedError/invalidLimit(_:maximum:)`` for a bad
/// `maximumBatch`, and the errors of ``FeedService/events(after:limit:)``. After an error the iteration is over.
public struct FeedChanges: AsyncSequence, Sendable {
    /// A batch: one or more events, in seq order, contiguous.
    public typealias Element = [EventRecord]
    /// Iteration throws only ``FeedError``.
    public typealias Failure = FeedError

    /// The largest `maximumBatch` accepted.
    public static let maximumBatchLimit = 100_000

    private let service: FeedService
    private let after: Int64
    private let maximumBatch: Int
    private let source: AnyPublisher<EventRecord, Never>

    /// A sequence over `service`'s log and `source`, its live events (the bridge's `changes`, or a test's subject).
    init(service: FeedService, after: Int64, maximumBatch: Int, source: AnyPublisher<EventRecord, Never>) {
        self.service = service
        self.after = after
        self.maximumBatch = maximumBatch
        self.source = source
    }

    /// Creates an iterator; it subscribes on its first `next()`.
    public func makeAsyncIterator() -> Iterator {
        Iterator(stream: ChangeStream(service: service, after: after, maximumBatch: maximumBatch, source: source))
    }

    /// Hands out the batches; see ``FeedChanges``.
    public struct Iterator: AsyncIteratorProtocol {
        let stream: ChangeStream

        /// The inbox the live subscription fills, for tests (`nil` once the iteration ended).
        var inbox: ChangeInbox? { stream.inbox }

        /// The next batch, or `nil` when the iteration ended (the task was cancelled).
        ///
        /// Suspends while nothing newer than the last handed-out event is available.
        public mutating func next() async throws(FeedError) -> [EventRecord]? {
            try await stream.next()
        }

        /// The next batch, or `nil` when the iteration ended; runs in the caller's isolation.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(FeedError) -> [EventRecord]? {
            try await stream.next()
        }
    }
}

/// One iteration's state: the subscription, the position and the phase. Used by one task at a time, through its
/// ``FeedChanges/Iterator``; copies of the iterator share it.
final class ChangeStream {
    private enum Phase {
        /// Not subscribed yet.
        case start
        /// Reading the log in pages; live events are buffered meanwhile.
        case backlog
        /// Handing out buffered live events, filling gaps from the log.
        case live
        /// Over: cancelled, failed or released. `next()` returns `nil`.
        case finished
    }

    private let service: FeedService
    private let source: AnyPublisher<EventRecord, Never>
    private let maximumBatch: Int
    /// The seq of the last event handed out (or the starting point).
    private var last: Int64
    private var phase = Phase.start
    /// What the live subscription delivers; dropped when the iteration ends.
    private(set) var inbox: ChangeInbox?
    /// The bridge subscription; cancelled when the iteration ends, or when this object is released.
    private var subscription: AnyCancellable?
    /// Whether this iteration holds the service's shared watch (``SharedChangeWatch``).
    private var holdsWatch = false

    init(service: FeedService, after: Int64, maximumBatch: Int, source: AnyPublisher<EventRecord, Never>) {
        self.service = service
        self.source = source
        self.maximumBatch = maximumBatch
        last = max(0, after)
        inbox = ChangeInbox()
    }

    func next() async throws(FeedError) -> [EventRecord]? {
        do {
            let batch = try await advance()
            if batch == nil { finish() }
            return batch
        } catch {
            finish()
            throw error
        }
    }

    /// The next batch, or `nil` when the iteration is over.
    private func advance() async throws(FeedError) -> [EventRecord]? {
        guard let inbox else { return nil }
        if phase == .start {
            guard (1...FeedChanges.maximumBatchLimit).contains(maximumBatch) else {
                throw FeedError.invalidLimit(maximumBatch, maximum: FeedChanges.maximumBatchLimit)
            }
            guard !Task.isCancelled else { return nil }
            // Subscribe before reading the log: whatever is committed after the read is then in the inbox. The sink
            // only appends and wakes the consumer; it never blocks the delivering thread.
            subscription = source.sink { [inbox] event in inbox.append(event) }
            // Other processes' and machines' commits reach the bridge through the service's shared watch.
            service.sharedWatch.retain(service: service)
            holdsWatch = true
            phase = .backlog
        }
        while true {
            guard !Task.isCancelled else { return nil }
            switch phase {
            case .start, .finished:
                return nil
            case .backlog:
                guard let page = try await readLog(limit: maximumBatch) else { return nil }
                // Live events the log already covered are dropped now, so a long backlog does not pile them up.
                inbox.discard(through: last)
                if page.count < maximumBatch { phase = .live }
                guard !Task.isCancelled else { return nil }
                if !page.isEmpty { return page }
            case .live:
                switch inbox.take(after: last, limit: maximumBatch) {
                case .events(let batch):
                    last = batch[batch.count - 1].seq
                    return batch
                case .gap(let firstBuffered):
                    // The bridge's next event is beyond the next seq: read the missing ones from the log first.
                    guard let page = try await readLog(limit: Int(min(Int64(maximumBatch), firstBuffered - last - 1))) else {
                        return nil
                    }
                    guard !page.isEmpty else { throw Self.pruned(at: last, through: firstBuffered - 1) }
                    guard !Task.isCancelled else { return nil }
                    return page
                case .empty:
                    guard await inbox.waitForEvents() else { return nil }
                }
            }
        }
    }

    /// Up to `limit` events after ``last`` from the log; advances ``last``. Throws when the log no longer has the
    /// next seq (it was pruned): seqs are gap-free, so a first event beyond `last + 1` means the ones between are gone.
    ///
    /// - Returns: the events, or `nil` when the task was cancelled before the read started.
    private func readLog(limit: Int) async throws(FeedError) -> [EventRecord]? {
        let page: [EventRecord]
        do {
            page = try await service.events(after: last, limit: limit)
        } catch .cancelled {
            return nil
        }
        if let first = page.first, first.seq > last + 1 {
            throw Self.pruned(at: last, through: first.seq - 1)
        }
        if let newest = page.last { last = newest.seq }
        return page
    }

    private static func pruned(at seq: Int64, through pruned: Int64) -> FeedError {
        .historyPruned(after: seq, prunedThrough: pruned)
    }

    /// Ends the iteration: cancels the subscription and drops the inbox.
    private func finish() {
        phase = .finished
        subscription?.cancel()
        subscription = nil
        inbox = nil
        releaseWatch()
    }

    deinit {
        releaseWatch()
    }

    private func releaseWatch() {
        guard holdsWatch else { return }
        holdsWatch = false
        service.sharedWatch.release()
    }
}

/// The live events a ``ChangeStream``'s subscription delivered and the consumer has not taken yet: an unbounded
/// buffer that the delivering thread only appends to.
final class ChangeInbox: Sendable {
    /// What ``take(after:limit:)`` found.
    enum Taken {
        /// Nothing newer than `after` is buffered.
        case empty
        /// The oldest buffered event newer than `after` has this seq, and it is not `after + 1`.
        case gap(Int64)
        /// Contiguous events from `after + 1` on.
        case events([EventRecord])
    }

    private struct State {
        var events: [EventRecord] = []
        /// The consumer suspended in ``waitForEvents()``.
        var waiter: CheckedContinuation<Bool, Never>?
        var cancelled = false
    }

    /// Called (for tests) each time a consumer suspends waiting for live events.
    @TaskLocal static var onPark: (@Sendable () -> Void)?

    private let state = Locked(State())

    /// Buffers a delivered event and wakes the consumer if it waits; never blocks beyond the short lock.
    func append(_ event: EventRecord) {
        let waiter = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.events.append(event)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: true)
    }

    /// Drops buffered events with `seq <= seq`.
    func discard(through seq: Int64) {
        state.withLock { state in
            let stale = state.events.prefix { $0.seq <= seq }.count
            if stale == state.events.count {
                state.events = []
            } else if stale > 0 {
                state.events.removeFirst(stale)
            }
        }
    }

    /// Drops events with `seq <= after`, then takes the contiguous run from `after + 1`, up to `limit` events.
    func take(after: Int64, limit: Int) -> Taken {
        state.withLock { state in
            let stale = state.events.prefix { $0.seq <= after }.count
            guard stale < state.events.count else {
                state.events = []
                return .empty
            }
            let first = state.events[stale].seq
            guard first == after + 1 else {
                if stale > 0 { state.events.removeFirst(stale) }
                return .gap(first)
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

    /// Waits until an event is buffered; returns `false` when the task was cancelled instead.
    func waitForEvents() async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let ready = state.withLock { state -> Bool? in
                    if state.cancelled { return false }
                    if !state.events.isEmpty { return true }
                    state.waiter = continuation
                    return nil
                }
                if let ready {
                    continuation.resume(returning: ready)
                } else {
                    Self.onPark?()
                }
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
}
