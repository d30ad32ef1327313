/// A publisher that relays values to its current subscribers without storing them, and that outside code can only subscribe to.
///
/// Only the owner, holding the `PassthroughPublisher` subclass, can send. Values reach
/// every subscriber with outstanding demand synchronously, on the sender's thread, before
/// `send` returns; a subscriber without demand misses the value.
///
/// - Note: Because `PassthroughPublisher` is a subclass, `as? PassthroughPublisher` on a
///   `ReadOnlyPassthroughPublisher` reference recovers the sender (a subclass that sends, handed out as its read-only superclass). Hand
///   out ``sealed()`` (an ``AnyPublisher`` holding only a subscribe closure) where that matters.
public class ReadOnlyPassthroughPublisher<Element: Sendable, Failure: Error>: Publisher, @unchecked Sendable {
    // @unchecked: the only stored state is `core`, a Sendable SubjectCore whose mutable state
    // lives behind its Mutex; the one subclass (final PassthroughPublisher) adds no stored state.

    /// The kind of values this publisher relays.
    public typealias Output = Element

    @usableFromInline let core: SubjectCore<Element, Failure>

    init() {
        core = SubjectCore(value: nil)
    }

    /// Whether any subscriber is attached now: a value sent now would reach someone.
    package var hasSubscribers: Bool { core.hasSubscribers }

    /// Attaches a subscriber; after completion it gets the completion at once and nothing else.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Element, S.Failure == Failure {
        core.subscribe(subscriber)
    }

    /// Returns a sealed, subscribe-only handle that no cast or `Mirror` walk can turn back into a sender.
    public func eraseToAnyPublisher() -> AnyPublisher<Element, Failure> {
        sealed()
    }

    /// Returns a sealed, subscribe-only handle that no cast or `Mirror` walk can turn back into a sender.
    ///
    /// The handle keeps only a closure that subscribes to the internal engine.
    public func sealed() -> AnyPublisher<Element, Failure> {
        let core = core
        return AnyPublisher(subscribe: { core.subscribe($0) })
    }
}
