/// A type that receives values and a completion from a publisher.
///
/// Subscribers must be `Sendable`: a publisher calls them on the thread that sends,
/// which may be any thread. Calls for one subscription arrive in send order when the
/// sender sends from one thread (or serializes its sends).
public protocol Subscriber<Input, Failure>: Sendable {
    /// The kind of values this subscriber receives.
    associatedtype Input

    /// The kind of error this subscriber may receive.
    associatedtype Failure: Error

    /// Tells the subscriber it has subscribed and hands it the subscription used to request values.
    ///
    /// - Parameter subscription: The subscription to request values through and to cancel.
    func receive(subscription: any Subscription)

    /// Delivers one value and asks how many more values the subscriber wants.
    ///
    /// - Parameter input: The value.
    /// - Returns: Additional demand, added to the outstanding demand (`.none` for no change).
    func receive(_ input: Input) -> Subscribers.Demand

    /// Tells the subscriber the publisher has finished, normally or with an error.
    ///
    /// - Parameter completion: `.finished` or `.failure(error)`.
    func receive(completion: Subscribers.Completion<Failure>)
}
