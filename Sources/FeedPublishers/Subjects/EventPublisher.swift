/// A wrapper that lets its owner send events, logs each one, and hands outsiders a subscribe-only publisher.
///
/// The logger runs once per `send`, before delivery, on the sender's thread.
/// ``publisher()`` returns a sealed ``AnyPublisher``: it holds only a subscribe closure, so
/// neither `as?` nor a `Mirror` walk recovers anything that can send.
///
/// ```swift
/// let likes = EventPublisher<LikeEvent> { print("👍 Like: \($0)") }
/// let token = likes.publisher().sink { handle($0) }
/// likes.send(.liked(postID: "post2"))
/// ```
public final class EventPublisher<Output: Sendable>: Sendable {
    @usableFromInline let subject = PassthroughPublisher<Output, Never>()
    @usableFromInline let logger: @Sendable (Output) -> Void

    /// Creates an event publisher with an optional logger.
    ///
    /// - Parameter logger: Called with every event before it is delivered; does nothing by default.
    public init(logger: @escaping @Sendable (Output) -> Void = { _ in }) {
        self.logger = logger
    }

    /// Logs the event, then delivers it to every current subscriber before returning.
    ///
    /// - Parameter value: The event.
    @inlinable
    public func send(_ value: Output) {
        logger(value)
        subject.send(value)
    }

    /// Whether any subscriber is attached now.
    package var hasSubscribers: Bool { subject.hasSubscribers }

    /// Returns a sealed, subscribe-only publisher of the events.
    public func publisher() -> AnyPublisher<Output, Never> {
        subject.sealed()
    }
}
