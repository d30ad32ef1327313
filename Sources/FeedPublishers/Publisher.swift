/// A type that can transmit a sequence of values over time to subscribers.
///
/// This is the Combine-shaped root protocol of FeedPublishers. A publisher delivers
/// values only while its subscriber has outstanding demand, then at most one completion.
/// Operators (`map`, `filter`, …) are extension methods that return `Publishers.<Name>`.
///
/// ```swift
/// let subject = PassthroughPublisher<Int, Never>()
/// let token = subject.map { $0 * 2 }.sink { print($0) }
/// subject.send(21) // prints 42
/// ```
public protocol Publisher<Output, Failure> {
    /// The kind of values this publisher produces.
    associatedtype Output

    /// The kind of error this publisher may publish; use `Never` for publishers that cannot fail.
    associatedtype Failure: Error

    /// Attaches the subscriber to this publisher.
    ///
    /// The publisher calls `receive(subscription:)` on the subscriber exactly once, then
    /// delivers values as demand allows, then at most one completion.
    func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure
}

extension Publisher {
    /// Attaches the subscriber to this publisher (Combine's spelling of `receive(subscriber:)`).
    ///
    /// - Parameter subscriber: The subscriber to attach.
    public func subscribe<S: Subscriber>(_ subscriber: S) where S.Input == Output, S.Failure == Failure {
        receive(subscriber: subscriber)
    }
}
