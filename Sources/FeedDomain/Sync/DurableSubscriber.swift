public import FeedPublishers
public import FeedSQLite
public import FeedStorage
internal import Foundation

/// A named subscriber that remembers, in the database, the last event it applied, and never misses or repeats one.
///
/// On ``start()`` it catches up from its stored cursor, then follows live changes from ``FeedService/bridge``
/// (and, with a ``ChangeFeed`` running, other processes' changes). Both paths read the log from the cursor, so
/// there is no gap and no duplicate at the switch-over: an event committed during catch-up is picked up by the
/// next pass.
///
/// Delivery guarantees depend on where the effect lives:
/// - ``Delivery/transactional(_:)``: the effect writes to the same database. Applying a batch of events and
///   advancing the cursor commit in one transaction: **exactly once**.
/// - ``Delivery/atLeastOnce(_:)``: the effect is outside the database. The cursor advances after the handler
///   returns, so a crash in between repeats those events after a restart: **at least once**. Deduplicate on
///   ``EventRecord/seq`` (it is strictly increasing, so remembering the last seq handled is enough).
///
/// When the log was pruned past the cursor, the subscriber cannot replay what it missed: it publishes
/// ``Signal/needsRebuild(cursor:prunedThrough:)`` and, given a `rebuild` closure, rebuilds its state from the
/// tables and jumps its cursor to the end of the log, in one transaction.
///
/// ```swift
/// let mirror = DurableSubscriber(name: "mirror", service: service, delivery: .transactional { event, db in
///     try db.run("INSERT INTO like_mirror …", …)
/// })
/// try mirror.start()
/// ```
public final class DurableSubscriber: Sendable {
    /// How events reach the subscriber's effect.
    public enum Delivery: Sendable {
        /// Apply inside the write transaction that also advances the cursor (exactly once).
        case transactional(@Sendable (EventRecord, Connection) throws -> Void)
        /// Handle outside the database; the cursor advances after the handler returns (at least once).
        case atLeastOnce(@Sendable (EventRecord) throws -> Void)
    }

    /// What happened to the subscriber.
    public enum Signal: Sendable, Hashable {
        /// Every committed event up to `seq` has been applied.
        case caughtUp(seq: Int64)
        /// The events after `cursor` up to `prunedThrough` were pruned from the log: the state must be rebuilt.
        case needsRebuild(cursor: Int64, prunedThrough: Int64)
        /// The state was rebuilt from the tables and the cursor moved to `seq`.
        case rebuilt(seq: Int64)
        /// A pass failed; the next change (or ``catchUp()``) retries from the stored cursor.
        case failed(FeedError)
    }

    /// The subscriber's name, the key of its stored cursor.
    public let name: String
    private let service: FeedService
    private let delivery: Delivery
    private let rebuild: (@Sendable (Connection) throws -> Void)?
    private let batchSize: Int
    private let queue: DispatchQueue
    private let signalSubject = PassthroughPublisher<Signal, Never>()
    private let live = Locked<LiveState>(LiveState())

    private struct LiveState {
        var subscription: AnyCancellable?
        var passScheduled = false
    }

    /// Creates a subscriber; nothing runs until ``start()`` or ``catchUp()``.
    ///
    /// - Parameters:
    ///   - name: 1 to 128 characters, unique per database.
    ///   - service: the database and its bridge.
    ///   - batchSize: events per transaction (transactional) or per cursor write (at least once).
    ///   - delivery: where the effect lives.
    ///   - rebuild: rebuilds the effect's state from the tables after pruning; runs in a write transaction.
    public init(
        name: String,
        service: FeedService,
        batchSize: Int = 1000,
        delivery: Delivery,
        rebuild: (@Sendable (Connection) throws -> Void)? = nil
    ) {
        precondition(batchSize > 0, "API Violation: batchSize must be positive")
        self.name = name
        self.service = service
        self.batchSize = batchSize
        self.delivery = delivery
        self.rebuild = rebuild
        self.queue = DispatchQueue(label: "FeedSync.DurableSubscriber")
    }

    /// What happens to the subscriber: caught up, needs rebuild, rebuilt, failed.
    public var signals: AnyPublisher<Signal, Never> { signalSubject.sealed() }

    /// The stored cursor: the last seq applied (0 when it never ran).
    public func cursor() throws(FeedError) -> Int64 {
        do {
            return try service.store.unsafeRead { db in try SubscriberCursorRepository(db).cursor(for: name) ?? 0 }
        } catch {
            throw FeedError.wrap(error, value: name)
        }
    }

    /// Follows live changes, then catches up synchronously from the stored cursor before returning.
    public func start() throws(FeedError) {
        let subscription = service.bridge.changes.sink { [weak self] _ in self?.schedulePass() }
        live.withLock { $0.subscription = subscription }
        try catchUp()
    }

    /// Stops following live changes; the cursor stays stored.
    public func stop() {
        let subscription = live.withLock { state -> AnyCancellable? in
            defer { state.subscription = nil }
            return state.subscription
        }
        subscription?.cancel()
        queue.sync {}
    }

    /// Applies every committed event after the cursor, in batches, on the calling thread.
    ///
    /// - Returns: how many events were applied.
    @discardableResult
    public func catchUp() throws(FeedError) -> Int {
        do {
            let applied = try queue.sync { try pass() }
            return applied
        } catch {
            let feedError = FeedError.wrap(error, value: name)
            signalSubject.send(.failed(feedError))
            throw feedError
        }
    }

    // MARK: - Internals

    private func schedulePass() {
        let shouldSchedule = live.withLock { state -> Bool in
            guard !state.passScheduled, state.subscription != nil else { return false }
            state.passScheduled = true
            return true
        }
        guard shouldSchedule else { return }
        queue.async { [self] in
            live.withLock { $0.passScheduled = false }
            do {
                _ = try pass()
            } catch {
                signalSubject.send(.failed(FeedError.wrap(error, value: name)))
            }
        }
    }

    /// One pass: rebuild if needed, then apply batches until the log is exhausted. Runs on `queue`.
    private func pass() throws -> Int {
        var applied = 0
        let store = service.store
        while true {
            let (cursor, pruned) = try store.unsafeRead { db in
                (try SubscriberCursorRepository(db).cursor(for: name) ?? 0, try EventLog(db).prunedThrough())
            }
            if pruned > cursor {
                signalSubject.send(.needsRebuild(cursor: cursor, prunedThrough: pruned))
                guard let rebuild else {
                    throw FeedError.storage(
                        .constraintViolation(
                            field: "subscriber \(name)", reason: "the log was pruned past its cursor and it has no rebuild"))
                }
                let seq = try store.write { db in
                    let last = try EventLog(db).lastSeq()
                    try rebuild(db)
                    try SubscriberCursorRepository(db).setCursor(last, for: name, at: Date())
                    return last
                }
                signalSubject.send(.rebuilt(seq: seq))
                continue
            }
            let count: Int
            switch delivery {
            case .transactional(let apply):
                count = try store.write { db in
                    var count = 0
                    var last = cursor
                    try EventLog(db).forEach(after: cursor, limit: batchSize) { event in
                        try apply(event, db)
                        last = event.seq
                        count += 1
                    }
                    if count > 0 { try SubscriberCursorRepository(db).setCursor(last, for: name, at: Date()) }
                    return count
                }
            case .atLeastOnce(let handle):
                let events = try store.unsafeRead { db in try EventLog(db).events(after: cursor, limit: batchSize) }
                var last = cursor
                var handled = 0
                defer {
                    if last > cursor {
                        _ = try? store.write { db in try SubscriberCursorRepository(db).setCursor(last, for: name, at: Date()) }
                    }
                }
                for event in events {
                    try handle(event)
                    last = event.seq
                    handled += 1
                }
                count = handled
            }
            applied += count
            if count < batchSize {
                let seq = try store.unsafeRead { db in try SubscriberCursorRepository(db).cursor(for: name) ?? 0 }
                signalSubject.send(.caughtUp(seq: seq))
                return applied
            }
        }
    }
}
