/// A type-erased, subscribe-only publisher that holds nothing but a subscribe closure.
///
/// Because the only stored property is a closure, neither `as?` nor a `Mirror` walk can
/// recover the publisher behind it (unlike Combine's `AnyPublisher`, whose stored box a
/// `Mirror` walk reaches). Subjects' ``ReadOnlyPassthroughPublisher/sealed()`` and
/// `eraseToAnyPublisher()` return such handles.
///
/// ```swift
/// let subject = PassthroughPublisher<Int, Never>()
/// let handle: AnyPublisher<Int, Never> = subject.eraseToAnyPublisher()
/// // handle as? PassthroughPublisher<Int, Never> == nil
/// ```
public struct AnyPublisher<Output, Failure: Error>: Publisher, Sendable {
    private let subscribeBody: @Sendable (any Subscriber<Output, Failure>) -> Void

    /// Wraps a publisher; wrapping an `AnyPublisher` returns it unchanged.
    ///
    /// - Parameter publisher: The publisher to erase.
    public init<P: Publisher & Sendable>(_ publisher: P) where P.Output == Output, P.Failure == Failure {
        if let erased = publisher as? AnyPublisher<Output, Failure> {
            self = erased
        } else {
            subscribeBody = { publisher.receive(subscriber: $0) }
        }
    }

    /// Creates a publisher from a subscribe closure.
    ///
    /// - Parameter subscribe: Called once per subscriber with that subscriber.
    public init(subscribe: @escaping @Sendable (any Subscriber<Output, Failure>) -> Void) {
        subscribeBody = subscribe
    }

    /// Attaches the subscriber to the erased publisher.
    public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
        subscribeBody(subscriber)
    }
}

extension Publisher where Self: Sendable {
    /// Wraps this publisher in an ``AnyPublisher``, hiding its type.
    ///
    /// On subjects, the class's own `eraseToAnyPublisher()` returns a sealed handle.
    public func eraseToAnyPublisher() -> AnyPublisher<Output, Failure> {
        AnyPublisher(self)
    }

    /// Returns a subscribe-only ``AnyPublisher`` that holds only a closure, so no cast recovers this publisher.
    public func sealed() -> AnyPublisher<Output, Failure> {
        AnyPublisher(self)
    }

    /// Same as ``sealed()``: a subscribe-only handle for code that must not send.
    public func readOnly() -> AnyPublisher<Output, Failure> {
        AnyPublisher(self)
    }
}
