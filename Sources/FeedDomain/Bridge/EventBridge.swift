public import FeedPublishers
public import FeedCore

/// Where committed changes go out: seed 004's `GlobalEventBridge`, without the global singleton.
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
/// Sinks run on the bridge's delivery executor, `FeedSync.Delivery`: one thread at a time, in seq order, after the
/// command that committed the change returned. A slow sink delays only later deliveries; move heavy work off it with
/// `receive(on:)`. ``waitForDelivery(through:timeout:)`` waits until a seq reached every sink.
///
/// Memory stays bounded while a slow sink holds delivery up: at most 10,000 committed events wait in memory; beyond
/// that only their range of seqs is kept, and delivery reads those events from the service's log when it gets there
/// (``FeedLogEvent/Kind/deliveryFellBehind``). Sinks still get every event once, in order — unless the events were
/// pruned before delivery read them, or the service was closed first.
public final class EventBridge: Sendable {
    // The subjects that send live only inside the sequencer's delivery closure and the sealed handles' subscribe
    // closures: no stored property leads to them, so a `Mirror` walk over the bridge (or anything holding it)
    // cannot reach a sender. The delivery closure takes an internal type, so it cannot be cast and called either.
    private let sealedLikes: AnyPublisher<LikeEvent, Never>
    private let sealedChanges: AnyPublisher<EventRecord, Never>
    let sequencer: EventSequencer

    /// Creates a bridge.
    ///
    /// - Parameter logger: called once per like event, before delivery (seed 004's `EventPublisher` logger).
    public convenience init(logger: (@Sendable (LikeEvent) -> Void)? = nil) {
        self.init(logger: logger, deliveryLimit: EventSequencer.defaultLimit)
    }

    /// Creates a bridge whose delivery holds at most `deliveryLimit` events in memory (tests use a small one).
    init(logger: (@Sendable (LikeEvent) -> Void)? = nil, deliveryLimit: Int) {
        let likeEvent = EventPublisher<LikeEvent>(logger: logger ?? { _ in })
        let changeSubject = PassthroughPublisher<EventRecord, Never>()
        sealedLikes = likeEvent.publisher()
        sealedChanges = changeSubject.sealed()
        let logs = logger != nil
        sequencer = EventSequencer(
            limit: deliveryLimit, isListened: { logs || changeSubject.hasSubscribers || likeEvent.hasSubscribers }
        ) { batch in
            for event in batch.events {
                changeSubject.send(event)
                switch event.kind {
                case .liked: if let postID = event.postID { likeEvent.send(.liked(postID: postID)) }
                case .unliked: if let postID = event.postID { likeEvent.send(.unliked(postID: postID)) }
                case .postCreated, .userCreated, .likeCountChanged: break
                }
            }
        }
    }

    /// Likes and unlikes, as `LikeEvent.liked(postID:)` / `.unliked(postID:)`.
    public var likePublisher: AnyPublisher<LikeEvent, Never> { sealedLikes }

    /// Every committed change with its seq, kind, user, post, new like count and time.
    public var changes: AnyPublisher<EventRecord, Never> { sealedChanges }

    /// The highest seq every subscriber's callback has returned for (0 before the first): a projection subscribed
    /// to the bridge has applied every event up to it.
    public var lastDeliveredSeq: Int64 { sequencer.lastDeliveredSeq }

    /// Waits until every subscriber's callback has returned for every event up to `seq` — for a test, a command-line
    /// tool or a demo that shows what a command it ran did to every view.
    ///
    /// - Returns: whether they had within `timeout`. Called inside a delivery (a sink of this bridge, or what it
    ///   runs) it answers at once whether they had already: waiting there would wait for itself.
    @discardableResult
    public func waitForDelivery(through seq: Int64, timeout: Duration = .seconds(10)) -> Bool {
        sequencer.waitForDelivery(through: seq, timeout: timeout)
    }
}
