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
    /// Memory stays bounded for a consumer that stops calling `next()`: the buffer holds at most four batches and at
    /// least 10,000 events; when it is full it drops them, and the stream reads them back from the log when the
    /// consumer asks (logged as ``FeedLogEvent/Kind/streamFellBehind``).
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
        FeedChanges(service: self, after: seq, maximumBatch: maximumBatch, source: nil)
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
/// `maximumBatch`, and the errors of ``FeedService/events(after:limit:)-3kiwb``. After an error the iteration is over.
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
    /// A test's subject instead of the bridge, or `nil` for the bridge.
    private let source: AnyPublisher<EventRecord, Never>?
    /// The inbox's capacity when a test sets it; ``ChangeInbox/capacity(forMaximumBatch:)`` otherwise.
    private let inboxCapacity: Int?

    /// A sequence over `service`'s log and `source`, its live events: the bridge's events and rewrites when `nil`, or
    /// a test's subject.
    init(
        service: FeedService, after: Int64, maximumBatch: Int, source: AnyPublisher<EventRecord, Never>?, inboxCapacity: Int? = nil
    ) {
        self.service = service
        self.after = after
        self.maximumBatch = maximumBatch
        self.source = source
        self.inboxCapacity = inboxCapacity
    }

    /// Creates an iterator; it subscribes on its first `next()`.
    public func makeAsyncIterator() -> Iterator {
        Iterator(
            stream: ChangeStream(
                service: service, after: after, maximumBatch: maximumBatch, source: source, inboxCapacity: inboxCapacity))
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
    private let source: AnyPublisher<EventRecord, Never>?
    private let maximumBatch: Int
    /// The seq of the last event handed out (or the starting point).
    private var last: Int64
    private var phase = Phase.start
    /// What the live subscription delivers; dropped when the iteration ends.
    private(set) var inbox: ChangeInbox?
    /// The last event handed out, to check that the log still holds it before reading on (`nil` until one was).
    private var lastEvent: EventRecord?
    /// The bridge subscription; cancelled when the iteration ends, or when this object is released.
    private var subscription: AnyCancellable?

    /// Whether this iteration holds the service's shared watch (``SharedChangeWatch``).
    private var holdsWatch = false

    init(
        service: FeedService, after: Int64, maximumBatch: Int, source: AnyPublisher<EventRecord, Never>?, inboxCapacity: Int? = nil
    ) {
        self.service = service
        self.source = source
        self.maximumBatch = maximumBatch
        last = max(0, after)
        inbox = ChangeInbox(capacity: inboxCapacity ?? ChangeInbox.capacity(forMaximumBatch: maximumBatch))
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
            // only appends and wakes the consumer; it never blocks the delivering thread. A full inbox drops what it
            // holds and the stream reads it back from the log (``ChangeInbox``).
            let append = { @Sendable [inbox, weak service] (event: EventRecord) in
                guard inbox.append(event) else { return }
                service?.log(
                    .streamFellBehind, .warning,
                    "a change stream's consumer fell more than \(inbox.capacity) events behind; the stream reads them from the log",
                    ["capacity": "\(inbox.capacity)", "droppedThrough": "\(event.seq)"])
            }
            if let source {
                subscription = source.sink(receiveValue: append)
            } else {
                // One queue for events and rewrites: a rewrite reaches the inbox before any event of the new history.
                subscription = service.bridge.subscribe(deliver: append) { [inbox] rewrite in inbox.markRewritten(rewrite) }
            }
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
                    lastEvent = batch[batch.count - 1]
                    return batch
                case .rewritten(let rewrite):
                    throw HistoryRewrite(after: last, head: rewrite.head).error
                case .gap(let through):
                    // The next seq is not buffered (the bridge's next event is beyond it, or the inbox dropped it when
                    // full): read the missing ones from the log first, a page at a time.
                    guard let page = try await readLog(limit: Int(min(Int64(maximumBatch), through - last))) else {
                        return nil
                    }
                    guard !page.isEmpty else { throw Self.pruned(at: last, through: through) }
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
    /// Throws ``FeedError/historyRewritten(after:head:)`` when the log no longer continues what was handed out: the
    /// read starts at the last event handed out, which must still be there as it was, and a read that finds nothing
    /// checks that ``last`` is not beyond the log's head.
    ///
    /// - Returns: the events, or `nil` when the task was cancelled before the read started.
    private func readLog(limit: Int) async throws(FeedError) -> [EventRecord]? {
        var page: [EventRecord]
        let handedOut = lastEvent
        do {
            page = try await service.events(after: handedOut == nil ? last : last - 1, limit: handedOut == nil ? limit : limit + 1)
        } catch .cancelled {
            return nil
        }
        if let handedOut, let first = page.first, first.seq == handedOut.seq {
            guard first.isSameEvent(as: handedOut) else { throw HistoryRewrite(after: last, head: try await head()).error }
            page.removeFirst()
        } else if last > 0, page.isEmpty || page.first?.seq ?? 0 > last + 1 {
            let head = try await head()
            if head < last { throw HistoryRewrite(after: last, head: head).error }
        }
        if let first = page.first, first.seq > last + 1 {
            throw Self.pruned(at: last, through: first.seq - 1)
        }
        if let newest = page.last {
            last = newest.seq
            lastEvent = newest
        }
        return page
    }

    /// The log's last seq.
    private func head() async throws(FeedError) -> Int64 {
        let service = service
        return try await service.onPool { () throws(FeedError) in try service.logHead() }
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
