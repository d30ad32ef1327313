/// The subject-side view of one subscription: what `send` and `send(completion:)` call.
@usableFromInline
protocol SubjectConduit<Output, Failure>: AnyObject, Sendable {
    associatedtype Output: Sendable
    associatedtype Failure: Error

    /// Delivers one value if the subscriber has demand (and, for current-value subjects, it is new).
    func deliver(_ value: Output, version: Int, frame: UnsafeMutablePointer<DeliveryFrame>)

    /// Delivers the completion once and stops further deliveries.
    func complete(_ completion: Subscribers.Completion<Failure>)
}
