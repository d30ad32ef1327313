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

    init(_ subject: CurrentValuePublisher<Element, Never>) {
        current = { subject.value }
        upstream = subject.sealed()
    }

    /// The current value.
    public var value: Element { current() }

    /// Subscribes: the subscriber gets the current value on its first demand, then every change.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Element, S.Failure == Never {
        upstream.receive(subscriber: subscriber)
    }
}
