public import FeedPublishers

/// A sealed, read-only current-value publisher: the current ``value`` and a subscription that starts with it.
///
/// It holds only closures, so neither a cast nor a `Mirror` walk leads back to anything that can send. Projections
/// expose their whole state through one.
public struct StatePublisher<Element: Sendable>: Publisher, Sendable {
    /// The published type.
    public typealias Output = Element
    /// State publishers never fail.
    public typealias Failure = Never

    private let current: @Sendable () -> Element
    private let upstream: AnyPublisher<Element, Never>

    /// - Parameter current: the newest state, which a subscriber gets moments later.
    init(_ subject: CurrentValuePublisher<Element, Never>, current: @escaping @Sendable () -> Element) {
        self.current = current
        upstream = subject.sealed()
    }

    /// The current value: every action whose `send` returned is applied. Subscribers get it moments later, on the
    /// projection's own executor.
    public var value: Element { current() }

    /// Subscribes: the subscriber gets the current value on its first demand, then every change.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Element, S.Failure == Never {
        upstream.receive(subscriber: subscriber)
    }
}
