extension Subscribers {
    /// How a publisher ended: normally, or with an error.
    public enum Completion<Failure: Error>: Sendable {
        /// The publisher finished normally.
        case finished

        /// The publisher stopped because of an error.
        case failure(Failure)
    }
}

extension Subscribers.Completion: Equatable where Failure: Equatable {}

extension Subscribers.Completion: Hashable where Failure: Hashable {}
