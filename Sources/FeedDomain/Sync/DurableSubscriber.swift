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
    ///     ``FeedError/subscriberTaken(_:)`` until this one stops (`FeedBackend.tryHold(name:)`). By default
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

    /// Applies every committed event after the cursor, in batches, on the calling thread, and returns when done —
    /// from any thread, a bridge sink or a projection's subscriber included. Passes take turns with the
    /// subscriber's scheduled ones.
    ///
    /// Called from inside this subscriber's own pass (its handler, its rebuild or a ``signals`` sink) it returns 0
    /// at once, as the pass in progress goes on to the end of the log. Called inside a write transaction on the same
    /// thread (another subscriber's transactional handler) it throws at once: the pass needs the writer that thread
    /// holds.
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
    final class Engine: Sendable {
        let name: String
        let service: FeedService
        let delivery: Delivery
        let rebuild: (@Sendable (SubscriberTransaction) throws -> Void)?
        let batchSize: Int
        /// Where scheduled passes run (live changes, retries).
        let queue: DispatchQueue
        /// Held by the thread running a pass: `queue` for a scheduled one, the caller for ``catchUp()``.
        let turn = NSLock()
        /// Where signals go out.
        let signals: SealedSubject<Signal>
        let live = Locked<LiveState>(LiveState())
        let exclusive: Bool
        /// The held name of an exclusive subscriber, from its first `start()` or `catchUp()` until `stop()`.
        let lease = Locked<(any FeedNameLease)?>(nil)

        struct LiveState {
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
        enum BatchOutcome {
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
            self.queue = DispatchQueue(label: "FeedSync.DurableSubscriber")
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
        func holdNameIfExclusive() throws(FeedError) {
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
                // A rewrite of the log (a failover, a restore) wakes it too: the events that follow its head may all
                // be committed already, and the cursor, kept in the database, went back with the events it lost.
                let subscription = service.bridge.subscribe(
                    deliver: { [weak self] _ in self?.schedulePass(liveOnly: true) },
                    rewritten: { [weak self] _ in self?.schedulePass(liveOnly: true) })
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
            // Inside a write on this thread (another subscriber's transactional handler), the pass would wait for the
            // writer this thread holds: fail at once, as a command does there.
            if service.backend.isWritingOnCurrentThread { throw GroupCommit.nestedWriteError(service.backend) }
            try holdNameIfExclusive()
            do {
                return try takingTurn { try pass(scheduled: false) }
            } catch {
                let feedError = FeedError.wrap(error, value: name)
                signals.send(.failed(feedError))
                throw feedError
            }
        }

    }
}
