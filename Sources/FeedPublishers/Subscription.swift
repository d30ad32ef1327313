/// A link between one publisher and one subscriber, through which the subscriber asks for values.
///
/// `request(_:)` adds demand; `cancel()` ends the link. Both may be called from any thread
/// and from inside the subscriber's own callbacks.
public protocol Subscription: Cancellable, Sendable {
    /// Asks the publisher for up to `demand` more values.
    ///
    /// FeedPublishers treats `request(.none)` as a no-op (Combine traps on it).
    ///
    /// - Parameter demand: How many more values the subscriber wants.
    func request(_ demand: Subscribers.Demand)
}
