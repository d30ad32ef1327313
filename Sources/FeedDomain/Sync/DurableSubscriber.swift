public import FeedPublishers
public import FeedCore
internal import Foundation

/// A named subscriber that remembers, in the database, the last event it applied, and never misses or repeats one.
///
/// On ``start()`` it catches up from its stored cursor, then follows live changes from ``FeedService/bridge``
/// (and, with a ``ChangeFeed`` running, other processes' changes). Both paths read the log from the cursor, so
/// there is no gap and no duplicate at the switch-over: an event committed during catch-up is picked up by the
/// next pass.
///
/// Delivery guarantees depend on where the effect lives:
/// - ``Delivery/transactional(_:)``: the effect writes to the same database. Reading the cursor, applying a batch
///   of events and advancing the cursor happen in one write transaction: **exactly once**, also when several
///   instances run under the same name at the same time, in one process or several (their transactions take
///   turns, and each one starts from the cursor the previous one left).
/// - ``Delivery/atLeastOnce(_:)``: the effect is outside the database. The cursor advances after the handler
///   returns, so a crash in between repeats those events after a restart: **at least once**. Deduplicate on
///   ``EventRecord/seq`` (it is strictly increasing, so remembering the last seq handled is enough). Two instances
///   running under the same name may both handle an event; the stored cursor only ever moves forward.
///
/// When the log cannot replay what the subscriber missed — it was pruned past the cursor, or likes were
/// bulk-loaded without events (seeding) since the subscriber's state was built — the subscriber publishes
/// ``Signal/needsRebuild(cursor:prunedThrough:)`` and, given a `rebuild` closure, rebuilds its state from the
/// tables and jumps its cursor to the end of the log, in one transaction.
///
/// Nothing reachable from a subscriber sends: ``signals`` is a sealed handle, and the subject behind it, the
/// service and the handlers are held only inside a closure's captures.
///
/// ```swift
/// let mirror = DurableSubscriber(name: "mirror", service: service, delivery: .transactional { event, db in
///     try db.execute("INSERT INTO like_mirror (user_id, post_id) VALUES ($1, $2)", [.text(event.userID), …])
/// })
/// try mirror.start()
/// ```
public final class DurableSubscriber: Sendable {
    /// How events reach the subscriber's effect.
    public enum Delivery: Sendable {
        /// Apply inside the write transaction that also advances the cursor (exactly once): write your effect
        /// through the handle (``SubscriberTransaction/execute(_:_:)``; `$1`, `$2` placeholders on every backend).
        case transactional(@Sendable (EventRecord, SubscriberTransaction) throws -> Void)
        /// Handle outside the database; the cursor advances after the handler returns (at least once).
        case atLeastOnce(@Sendable (EventRecord) throws -> Void)
    }

    /// What happened to the subscriber.
    public enum Signal: Sendable, Hashable {
        /// Every committed event up to `seq` has been applied.
        case caughtUp(seq: Int64)
        /// The log cannot replay what the subscriber missed after `cursor`, up to `prunedThrough`: those events were
        /// pruned, or likes were bulk-loaded without events when the log ended at `prunedThrough`. The state must
        /// be rebuilt from the tables.
        case needsRebuild(cursor: Int64, prunedThrough: Int64)
        /// The state was rebuilt from the tables and the cursor moved to `seq`.
        case rebuilt(seq: Int64)
        /// A pass failed; the next change (or ``catchUp()``) retries from the stored cursor.
        case failed(FeedError)
    }

    /// The subscriber's name, the key of its stored cursor.
    public let name: String
    private let signalHandle: AnyPublisher<Signal, Never>
    /// The only way to the engine. A `Mirror` walk does not see a closure's captures, and outside code cannot call
    /// the closure: it cannot make an ``EngineKey``, nor cast the closure to a type it can name.
    private let engine: @Sendable (EngineKey) -> Engine

    /// Creates a subscriber; nothing runs until ``start()`` or ``catchUp()``.
    ///
    /// - Parameters:
    ///   - name: 1 to 128 characters, unique per database and effect (instances sharing a name share a cursor).
    ///   - service: the database and its bridge.
    ///   - batchSize: events per transaction (transactional) or per cursor write (at least once).
    ///   - delivery: where the effect lives.
    ///   - rebuild: rebuilds the effect's state from the tables after pruning or a bulk load; runs in a write
    ///     transaction.
    ///   - exclusive: hold the name while running, so that one instance at a time — in any process, on any
    ///     machine using the database — runs under it; another instance's ``start()`` or ``catchUp()`` fails with
    ///     ``FeedError/subscriberTaken(_:)`` until this one stops (``FeedBackend/tryHold(name:)``). By default
    ///     instances may share a name: they share the cursor and take turns.
    public init(
        name: String,
        service: FeedService,
        batchSize: Int = 1000,
        delivery: Delivery,
        rebuild: (@Sendable (SubscriberTransaction) throws -> Void)? = nil,
        exclusive: Bool = false
    ) {
        precondition(batchSize > 0, "API Violation: batchSize must be positive")
        self.name = name
        let signals = SealedSubject<Signal>()
        signalHandle = signals.publisher
        let engine = Engine(
            name: name, service: service, batchSize: batchSize, delivery: delivery, rebuild: rebuild, signals: signals,
            exclusive: exclusive)
        self.engine = { _ in engine }
    }

    /// What happens to the subscriber: caught up, needs rebuild, rebuilt, failed.
    ///
    /// Signals are sent on the thread running the pass (the subscriber's queue, or the caller of ``catchUp()``);
    /// a sink may call ``stop()`` or ``catchUp()`` without deadlock.
    public var signals: AnyPublisher<Signal, Never> { signalHandle }

    /// The stored cursor: the last seq applied (0 when it never ran).
    public func cursor() throws(FeedError) -> Int64 {
        try engine(EngineKey()).cursor()
    }

    /// Follows live changes, then catches up synchronously from the stored cursor before returning.
    ///
    /// Calling it while the subscriber already follows changes only catches up.
    public func start() throws(FeedError) {
        try engine(EngineKey()).start()
    }

    /// Stops following live changes; the cursor stays stored. Returns at once and never waits for another thread.
    ///
    /// A pass in progress applies no event after the one being handled: at least once, the next event is not
    /// handed to the handler; transactionally, the batch commits with the events applied so far and the cursor
    /// after the last of them. So `stop()` may be called from the subscriber's own handler, a ``signals`` sink, a
    /// bridge sink or inside a transaction. Events committed later are applied by the next ``start()`` or
    /// ``catchUp()``.
    public func stop() {
        engine(EngineKey()).stop()
    }

    /// Applies every committed event after the cursor, in batches, on the calling thread.
    ///
    /// Where waiting could deadlock, it does not wait: called from inside this subscriber's own pass (its handler,
    /// its rebuild or a ``signals`` sink) it returns 0 at once, as the pass in progress goes on to the end of the
    /// log; called from inside another subscriber's pass (which may hold the writer) or a library callback that
    /// must not block (a bridge sink, a projection's effect), it schedules a pass on the subscriber's queue and
    /// returns 0. Do not call it inside your own write transaction: the pass needs the writer.
    ///
    /// - Returns: how many events were applied.
    @discardableResult
    public func catchUp() throws(FeedError) -> Int {
        try engine(EngineKey()).catchUp()
    }

    // MARK: - Engine

    /// Unlocks the engine closure; private, so outside code cannot make one.
    private struct EngineKey {}

    /// Does the work of a subscriber; reachable only through the subscriber's engine closure.
    private final class Engine: Sendable {
        private let name: String
        private let service: FeedService
        private let delivery: Delivery
        private let rebuild: (@Sendable (SubscriberTransaction) throws -> Void)?
        private let batchSize: Int
        private let queue: DispatchQueue
        /// Where signals go out.
        private let signals: SealedSubject<Signal>
        private let live = Locked<LiveState>(LiveState())
        private let exclusive: Bool
        /// The held name of an exclusive subscriber, from its first `start()` or `catchUp()` until `stop()`.
        private let lease = Locked<(any FeedNameLease)?>(nil)

        private struct LiveState {
            /// The bridge subscription while following live changes.
            var subscription: AnyCancellable?
            /// A queued pass that has not started yet: `true` when it runs only while following live changes,
            /// `false` when it was asked for explicitly; `nil` when none is queued.
            var queuedPassIsLiveOnly: Bool?
            /// Bumped by every `stop()`: a pass that started under an older value stops before its next event.
            var stopEpoch: UInt64 = 0
            /// The thread running a pass now, to recognise calls made from inside it.
            var passThread: pthread_t?
            /// The pause before the next retry of a failed live pass; zero after a pass that succeeded.
            var retryDelay: Duration = .zero
        }

        /// Why a pass ends a transaction without a full batch.
        private enum BatchOutcome {
            case applied(count: Int, through: Int64, stopped: Bool)
            case needsRebuild(cursor: Int64, through: Int64)
        }

        init(
            name: String, service: FeedService, batchSize: Int, delivery: Delivery,
            rebuild: (@Sendable (SubscriberTransaction) throws -> Void)?, signals: SealedSubject<Signal>, exclusive: Bool
        ) {
            self.exclusive = exclusive
            self.name = name
            self.service = service
            self.batchSize = batchSize
            self.delivery = delivery
            self.rebuild = rebuild
            self.signals = signals
            self.queue = FeedExecutor.makeQueue(label: "FeedSync.DurableSubscriber")
        }

        func cursor() throws(FeedError) -> Int64 {
            try service.checkOpen()
            do {
                return try service.backend.readOnce { tx in try tx.subscriberPosition(for: name)?.lastSeq ?? 0 }
            } catch {
                throw FeedError.wrap(error, value: name)
            }
        }

        /// For an exclusive subscriber, holds its name (once); other holders make it fail with `subscriberTaken`.
        private func holdNameIfExclusive() throws(FeedError) {
            guard exclusive, lease.withLock({ $0 == nil }) else { return }
            let taken: (any FeedNameLease)?
            do {
                taken = try service.backend.tryHold(name: "subscriber/" + name)
            } catch {
                throw FeedError.wrap(error, value: name)
            }
            guard let taken else { throw FeedError.subscriberTaken(name) }
            let duplicate = lease.withLock { held -> (any FeedNameLease)? in
                guard held == nil else { return taken }
                held = taken
                return nil
            }
            duplicate?.release()
        }

        func start() throws(FeedError) {
            try service.checkOpen()
            try holdNameIfExclusive()
            let needsSubscription = live.withLock { $0.subscription == nil }
            if needsSubscription {
                let subscription = service.bridge.changes.sink { [weak self] _ in self?.schedulePass(liveOnly: true) }
                let duplicate = live.withLock { state -> AnyCancellable? in
                    guard state.subscription == nil else { return subscription }
                    state.subscription = subscription
                    return nil
                }
                duplicate?.cancel()
            }
            _ = try catchUp()
        }

        func stop() {
            let subscription = live.withLock { state -> AnyCancellable? in
                state.stopEpoch &+= 1
                defer { state.subscription = nil }
                return state.subscription
            }
            // Cancelling waits only for a delivery into this subscription's sink on another thread, and that sink
            // only schedules a pass: it never blocks.
            subscription?.cancel()
            let held = lease.withLock { held in
                defer { held = nil }
                return held
            }
            held?.release()
        }

        func catchUp() throws(FeedError) -> Int {
            let insideOwnPass = live.withLock { state in
                state.passThread.map { pthread_equal($0, pthread_self()) != 0 } ?? false
            }
            // The pass in progress on this thread goes on to the end of the log (unless stopped).
            if insideOwnPass { return 0 }
            try service.checkOpen()
            try holdNameIfExclusive()
            if FeedExecutor.isCurrent || service.backend.isWritingOnCurrentThread {
                // Inside a callback (code on an executor never waits for another), or inside a write transaction (a
                // pass needs the writer): schedule the pass instead of waiting for it.
                schedulePass(liveOnly: false)
                return 0
            }
            do {
                return try queue.sync { try pass(scheduled: false) }
            } catch {
                let feedError = FeedError.wrap(error, value: name)
                signals.send(.failed(feedError))
                throw feedError
            }
        }

        // MARK: - Passes

        /// Queues a pass unless one is queued already. A live-only pass is dropped when the subscriber stopped
        /// following changes before it started.
        private func schedulePass(liveOnly: Bool) {
            let shouldSchedule = live.withLock { state -> Bool in
                if liveOnly && state.subscription == nil { return false }
                if let queuedIsLiveOnly = state.queuedPassIsLiveOnly {
                    state.queuedPassIsLiveOnly = queuedIsLiveOnly && liveOnly
                    return false
                }
                state.queuedPassIsLiveOnly = liveOnly
                return true
            }
            guard shouldSchedule else { return }
            queue.async { [self] in
                do {
                    _ = try pass(scheduled: true)
                    live.withLock { $0.retryDelay = .zero }
                } catch {
                    // After close() the backend refuses everything: say so, not what it refused with.
                    let failure = service.isClosed ? FeedError.serviceClosed : FeedError.wrap(error, value: name)
                    signals.send(.failed(failure))
                    retryAfterFailure(failure)
                }
            }
        }

        /// After a failed live pass (a lost connection, a busy database, a failing handler), runs another one after
        /// a pause that doubles from 10 ms up to 2 s, for as long as the subscriber follows live changes. The event
        /// that scheduled the failed pass is still unapplied: waiting for the next commit to retry would leave it so
        /// in a quiet system. A closed service ends the retries.
        private func retryAfterFailure(_ failure: FeedError) {
            let delay = live.withLock { state -> Duration? in
                guard state.subscription != nil, !service.isClosed else { return nil }
                state.retryDelay = min(max(state.retryDelay * 2, .milliseconds(10)), .seconds(2))
                return state.retryDelay
            }
            guard let delay else { return }
            service.log(
                .subscriberRetrying, .warning,
                "durable subscriber \(FeedError.quoted(name)) failed a pass and retries in \(FeedService.milliseconds(delay)) ms: \(failure)",
                ["subscriber": name, "error": failure.description, "retryMilliseconds": "\(FeedService.milliseconds(delay))"])
            let (seconds, attoseconds) = delay.components
            let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
            queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
                self?.schedulePass(liveOnly: true)
            }
        }

        /// One pass: rebuild if needed, then apply batches until the log is exhausted or the subscriber stops. Runs on
        /// `queue`.
        private func pass(scheduled: Bool) throws -> Int {
            let epoch = live.withLock { state -> UInt64? in
                if scheduled {
                    let liveOnly = state.queuedPassIsLiveOnly ?? true
                    state.queuedPassIsLiveOnly = nil
                    if liveOnly && state.subscription == nil { return nil }
                }
                state.passThread = pthread_self()
                return state.stopEpoch
            }
            guard let epoch else { return 0 }
            defer { live.withLock { $0.passThread = nil } }
            let stopped = { [live] in live.withLock { $0.stopEpoch != epoch } }

            var applied = 0
            while !stopped() {
                let outcome: BatchOutcome
                switch delivery {
                case .transactional(let apply): outcome = try transactionalBatch(apply, stopped: stopped)
                case .atLeastOnce(let handle): outcome = try atLeastOnceBatch(handle, stopped: stopped)
                }
                switch outcome {
                case .needsRebuild(let cursor, let through):
                    signals.send(.needsRebuild(cursor: cursor, prunedThrough: through))
                    if stopped() { return applied }
                    try rebuildState(cursor: cursor, through: through)
                case .applied(let count, let through, let stoppedDuringBatch):
                    applied += count
                    if stoppedDuringBatch { return applied }
                    if count < batchSize {
                        signals.send(.caughtUp(seq: through))
                        return applied
                    }
                }
            }
            return applied
        }

        /// Reads the position, applies up to a batch and advances the cursor, all in one write transaction.
        private func transactionalBatch(
            _ apply: @Sendable (EventRecord, SubscriberTransaction) throws -> Void, stopped: () -> Bool
        ) throws -> BatchOutcome {
            try service.backend.write(
                { tx in
                    let position = try tx.subscriberPosition(for: name) ?? .start
                    if let through = try tx.replayBaseline().rebuildPoint(for: position) {
                        return .needsRebuild(cursor: position.lastSeq, through: through)
                    }
                    var count = 0
                    var last = position.lastSeq
                    var stoppedDuringBatch = false
                    let handle = SubscriberTransaction(tx)
                    for event in try tx.events(after: position.lastSeq, limit: batchSize) {
                        if stopped() {
                            stoppedDuringBatch = true
                            break
                        }
                        try handling(event) {
                            try apply(event, handle)
                            try handle.rethrowFailure()
                        }
                        last = event.seq
                        count += 1
                    }
                    if count > 0 { _ = try tx.advanceSubscriberCursor(last, for: name, at: Date()) }
                    return .applied(count: count, through: last, stopped: stoppedDuringBatch || stopped())
                }, afterCommit: { _ in })
        }

        /// Reads the position and a batch in one snapshot, hands the events to the handler outside any transaction,
        /// then moves the cursor forward (never back) past the events handled.
        private func atLeastOnceBatch(_ handle: @Sendable (EventRecord) throws -> Void, stopped: () -> Bool) throws -> BatchOutcome {
            let backend = service.backend
            let (position, rebuildPoint, events) = try backend.read { tx in
                let position = try tx.subscriberPosition(for: name) ?? .start
                let point = try tx.replayBaseline().rebuildPoint(for: position)
                return (position, point, point == nil ? try tx.events(after: position.lastSeq, limit: batchSize) : [])
            }
            if let rebuildPoint { return .needsRebuild(cursor: position.lastSeq, through: rebuildPoint) }
            var last = position.lastSeq
            var handled = 0
            var stoppedDuringBatch = false
            defer {
                if last > position.lastSeq {
                    _ = try? backend.write(
                        { tx in try tx.advanceSubscriberCursor(last, for: name, at: Date()) }, afterCommit: { _ in })
                }
            }
            for event in events {
                if stopped() {
                    stoppedDuringBatch = true
                    break
                }
                try handling(event) { try handle(event) }
                last = event.seq
                handled += 1
            }
            return .applied(count: handled, through: last, stopped: stoppedDuringBatch || stopped())
        }

        /// Runs the handler (or rebuild) for `event` (`nil` for a rebuild). What it throws is carried as
        /// ``FeedError/handlerFailed(subscriber:seq:error:)``, except a database failure under it (a ``StorageError``,
        /// or a ``FeedError/storage(_:)``), which stays one: the backend retries or reports it as any other.
        private func handling(_ event: EventRecord?, _ body: () throws -> Void) throws {
            do {
                try body()
            } catch let error as StorageError {
                throw error
            } catch FeedError.storage(let error) {
                throw error
            } catch {
                throw FeedError.handlerFailed(subscriber: name, seq: event?.seq, error: FeedError.HandlerError(error))
            }
        }

        /// Rebuilds the state from the tables and moves the cursor to the end of the log, in one transaction — unless
        /// another instance under the same name did it meanwhile. Without a rebuild closure, the subscriber cannot go
        /// on: ``FeedError/historyPruned(after:prunedThrough:)``.
        private func rebuildState(cursor: Int64, through: Int64) throws {
            guard let rebuild else { throw FeedError.historyPruned(after: cursor, prunedThrough: through) }
            let seq = try service.backend.write(
                { tx -> Int64? in
                    let baseline = try tx.replayBaseline()
                    guard baseline.rebuildPoint(for: try tx.subscriberPosition(for: name) ?? .start) != nil else { return nil }
                    let last = try tx.lastSeq()
                    let handle = SubscriberTransaction(tx)
                    try handling(nil) {
                        try rebuild(handle)
                        try handle.rethrowFailure()
                    }
                    try tx.markSubscriberRebuilt(name, through: last, bulkGeneration: baseline.bulkGeneration, at: Date())
                    return last
                }, afterCommit: { _ in })
            if let seq { signals.send(.rebuilt(seq: seq)) }
        }
    }
}
