public import FeedPublishers
public import FeedCore

/// Where committed changes go out: the app's one event bridge between screens, without a global singleton.
///
/// Create one per database (``FeedService`` does) and hand it to whoever needs it. Outside code can only
/// subscribe: ``likePublisher`` and ``changes`` are sealed read-only handles that cannot be cast or reflected back
/// into anything that sends. Only the domain publishes, and only after the change's transaction has committed,
/// in `seq` order, each event once.
///
/// ```swift
/// let bridge = EventBridge { print("👍 Like event: \($0)") }
/// bridge.likePublisher
///     .sink { event in
///         switch event {
///         case let .liked(postID): likedPostIDs.insert(postID)
///         case let .unliked(postID): likedPostIDs.remove(postID)
///         }
///     }
///     .store(in: &cancellables)
/// ```
///
/// Every subscriber — a sink on ``likePublisher`` or ``changes``, a projection, a change stream, a durable
/// subscriber — gets the events on an executor of its own (`FeedSync.Subscriber`), in seq order, each once, after the
/// command that committed them returned. One subscriber never waits for another: a slow sink falls behind alone,
/// and the others get each event as soon as it is handed over. ``waitForDelivery(through:timeout:)`` waits until a
/// seq reached every subscriber.
///
/// Memory stays bounded behind a slow subscriber: its queue holds at most 10,000 committed events; beyond that only
/// their range of seqs is kept, and its queue reads those events from the service's log when it gets there
/// (``FeedLogEvent/Kind/deliveryFellBehind``). It still gets every event once, in order — unless the events were
/// pruned before it read them, or the service was closed first.
public final class EventBridge: Sendable {
    // The subjects that send live only inside the fan-out's delivery closures (one per subscriber) and the sealed
    // handles' subscribe closures: no stored property leads to them, so a `Mirror` walk over the bridge (or anything
    // holding it) cannot reach a sender. The delivery closures take an internal type, so they cannot be cast and
    // called either.
    private let sealedLikes: AnyPublisher<LikeEvent, Never>
    private let sealedChanges: AnyPublisher<EventRecord, Never>
    private let sealedRewrites: AnyPublisher<HistoryRewrite, Never>
    let sequencer: EventSequencer
    let fanout: DeliveryFanout

    /// Creates a bridge.
    ///
    /// - Parameter logger: called once per like event, in seq order, on an executor of its own (a log line
    ///   per like, for instance).
    public convenience init(logger: (@Sendable (LikeEvent) -> Void)? = nil) {
        self.init(logger: logger, deliveryLimit: EventSequencer.defaultLimit)
    }

    /// Creates a bridge whose subscribers' queues hold at most `deliveryLimit` events in memory (tests use a small
    /// one).
    init(logger: (@Sendable (LikeEvent) -> Void)? = nil, deliveryLimit: Int) {
        let fanout = DeliveryFanout(limit: deliveryLimit)
        self.fanout = fanout
        sealedChanges = Self.publisher(on: fanout) { $0 }
        sealedLikes = Self.publisher(on: fanout, Self.likeEvent)
        sealedRewrites = AnyPublisher { subscriber in
            let subject = PassthroughPublisher<HistoryRewrite, Never>()
            subject.receive(subscriber: subscriber)
            fanout.add(
                deliver: { _, _ in }, isAlive: { subject.hasSubscribers }, rewritten: { _, rewrite in subject.send(rewrite) },
                onlyRewrites: true)
        }
        if let logger {
            fanout.add(
                label: "FeedSync.Logger", deliver: { _, event in if let like = Self.likeEvent(event) { logger(like) } },
                isAlive: { true })
        }
        sequencer = EventSequencer(
            limit: deliveryLimit, logSource: { fanout.logSource }, isListened: { fanout.hasSubscribers }
        ) { batch in fanout.enqueue(batch) }
    }

    /// A sealed publisher whose every subscriber gets a queue of its own on `fanout`, publishing `transform` of each
    /// event (events it maps to `nil` are skipped).
    private static func publisher<Output: Sendable>(
        on fanout: DeliveryFanout, _ transform: @escaping @Sendable (EventRecord) -> Output?
    ) -> AnyPublisher<Output, Never> {
        AnyPublisher { subscriber in
            // One subject per subscriber: it keeps Combine's rules (demand, cancellation) for that subscriber, and
            // only this subscriber's queue sends to it.
            let subject = PassthroughPublisher<Output, Never>()
            subject.receive(subscriber: subscriber)
            fanout.add(
                deliver: { _, event in if let value = transform(event) { subject.send(value) } },
                isAlive: { subject.hasSubscribers })
        }
    }

    private static func likeEvent(_ event: EventRecord) -> LikeEvent? {
        guard let postID = event.postID else { return nil }
        switch event.kind {
        case .liked: return .liked(postID: postID)
        case .unliked: return .unliked(postID: postID)
        case .postCreated, .userCreated, .likeCountChanged, .postDeleted, .userDeleted: return nil
        }
    }

    /// Likes and unlikes, as `LikeEvent.liked(postID:)` / `.unliked(postID:)`.
    public var likePublisher: AnyPublisher<LikeEvent, Never> { sealedLikes }

    /// Every committed change with its seq, kind, user, post, new like count and time.
    public var changes: AnyPublisher<EventRecord, Never> { sealedChanges }

    /// Each time the log stopped continuing the history delivered so far — a failover to a standby that lacked the
    /// last commits (asynchronous replication), or a restored backup. Found by ``ChangeFeed``, a catch-up
    /// (``FeedService/publishCommittedEvents(batchSize:)-6qi0e``) or a local commit whose seq was delivered as another
    /// event; each subscriber of ``changes`` gets what came before it, then nothing until events after
    /// ``HistoryRewrite/head``. What was built from the events is to be rebuilt from the tables.
    public var historyRewrites: AnyPublisher<HistoryRewrite, Never> { sealedRewrites }

    /// Subscribes one queue to both the events and the rewrites, so that a rewrite reaches `rewritten` after the old
    /// history's events and before any event of the new one (a ``FeedChanges`` stream); `deliver` and `rewritten` run
    /// on the queue's executor. Ends when the returned value is cancelled.
    package func subscribe(
        deliver: @escaping @Sendable (EventRecord) -> Void, rewritten: @escaping @Sendable (HistoryRewrite) -> Void
    ) -> AnyCancellable {
        // Cancelling drops the callbacks, and what they hold, at once; the queue goes at the next hand-off.
        let callbacks = Locked<SubscriberCallbacks?>(SubscriberCallbacks(deliver: deliver, rewritten: rewritten))
        fanout.add(
            deliver: { _, event in callbacks.withLock { $0 }?.deliver(event) }, isAlive: { callbacks.withLock { $0 != nil } },
            rewritten: { _, rewrite in callbacks.withLock { $0 }?.rewritten(rewrite) })
        return AnyCancellable { callbacks.withLock { $0 = nil } }
    }

    /// The highest seq every subscriber's callback has returned for (0 before the first): a projection subscribed
    /// to the bridge has applied every event up to it.
    public var lastDeliveredSeq: Int64 { min(sequencer.lastDeliveredSeq, fanout.deliveredFloor) }

    /// Waits until every subscriber's callback has returned for every event up to `seq` — for a test, a command-line
    /// tool or a demo that shows what a command it ran did to every view.
    ///
    /// - Returns: whether they had within `timeout`. Called inside a delivery (a subscriber of this bridge, or what
    ///   it runs) it answers at once whether they had already: waiting there would wait for itself.
    @discardableResult
    public func waitForDelivery(through seq: Int64, timeout: Duration = .seconds(10)) -> Bool {
        guard !fanout.isDelivering else { return lastDeliveredSeq >= seq }
        let deadline = EventSequencer.deadline(after: timeout)
        return sequencer.waitForDelivery(through: seq, until: deadline) && fanout.wait(through: seq, until: deadline)
    }

    /// The events subscribers' queues hold in memory now, and the most one queue ever held (for tests).
    var bufferedEvents: (now: Int, most: Int) { fanout.bufferedEvents }
}

/// A subscriber's two callbacks, kept in a struct: a closure (or a tuple or optional of closures) held directly as a
/// generic lock's value is wrapped in one more reabstraction thunk at each `inout` access, so a long-lived
/// subscription's call chain would grow with every event delivered.
private struct SubscriberCallbacks: Sendable {
    let deliver: @Sendable (EventRecord) -> Void
    let rewritten: @Sendable (HistoryRewrite) -> Void
}
