/// A publisher that holds a current value and replays it to new subscribers, and that outside code can only read and subscribe to.
///
/// Only the owner, holding the `CurrentValuePublisher` subclass, can send. A new subscriber
/// gets the value current when it first requests; a subscriber that refused a value for
/// lack of demand gets only the latest value on its next request (Combine's rules).
///
/// - Note: `CurrentValuePublisher` is a subclass, so `as? CurrentValuePublisher` recovers the
///   sender from this type (a subclass that sends, handed out as its read-only superclass). Hand out ``sealed()`` where that matters.
public class ReadOnlyCurrentValuePublisher<Element: Sendable, Failure: Error>: Publisher, @unchecked Sendable {
    // @unchecked: the only stored state is `core`, a Sendable SubjectCore whose mutable state
    // lives behind its Mutex; the one subclass (final CurrentValuePublisher) adds no stored state.

    /// The kind of values this publisher holds and sends.
    public typealias Output = Element

    @usableFromInline let core: SubjectCore<Element, Failure>

    init(_ initialValue: Element) {
        core = SubjectCore(value: initialValue)
    }

    /// The current value: the initial value or the last one sent before completion.
    public var value: Element {
        guard let value = core.currentValue else {
            preconditionFailure("FeedPublishers internal error: a current-value publisher lost its value")
        }
        return value
    }

    /// Attaches a subscriber; it gets the current value on its first request, or only the completion once completed.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Element, S.Failure == Failure {
        core.subscribe(subscriber)
    }

    /// Returns a sealed, subscribe-only handle that no cast or `Mirror` walk can turn back into a sender.
    public func eraseToAnyPublisher() -> AnyPublisher<Element, Failure> {
        sealed()
    }

    /// Returns a sealed, subscribe-only handle that no cast or `Mirror` walk can turn back into a sender.
    ///
    /// The handle keeps only a closure that subscribes to the internal engine (it does not
    /// offer `value`; read that from a handle you own).
    public func sealed() -> AnyPublisher<Element, Failure> {
        let core = core
        return AnyPublisher(subscribe: { core.subscribe($0) })
    }
}
