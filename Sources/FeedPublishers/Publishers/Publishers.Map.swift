extension Publishers {
    /// A publisher that transforms every upstream value with a closure.
    public struct Map<Upstream: Publisher, Output>: Publisher {
        /// The upstream's failure type.
        public typealias Failure = Upstream.Failure

        /// The publisher whose values are transformed.
        public let upstream: Upstream

        /// The transformation, run on the sender's thread.
        public let transform: @Sendable (Upstream.Output) -> Output

        /// Creates the operator; prefer `upstream.map(_:)`.
        public init(upstream: Upstream, transform: @escaping @Sendable (Upstream.Output) -> Output) {
            self.upstream = upstream
            self.transform = transform
        }

        /// Subscribes to the upstream with a subscriber that forwards transformed values.
        public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
            upstream.receive(subscriber: Inner(downstream: subscriber, transform: transform))
        }

        /// Passes the upstream subscription straight through: mapping does not change demand.
        struct Inner<Downstream: Subscriber>: Subscriber
        where Downstream.Input == Output, Downstream.Failure == Upstream.Failure {
            let downstream: Downstream
            let transform: @Sendable (Upstream.Output) -> Output

            func receive(subscription: any Subscription) {
                downstream.receive(subscription: subscription)
            }

            func receive(_ input: Upstream.Output) -> Subscribers.Demand {
                downstream.receive(transform(input))
            }

            func receive(completion: Subscribers.Completion<Upstream.Failure>) {
                downstream.receive(completion: completion)
            }
        }
    }
}

extension Publishers.Map: Sendable where Upstream: Sendable {}

extension Publisher {
    /// Transforms every value with a closure.
    ///
    /// ```swift
    /// subject.map { $0 * 2 }.sink { print($0) }
    /// ```
    public func map<T>(_ transform: @escaping @Sendable (Output) -> T) -> Publishers.Map<Self, T> {
        Publishers.Map(upstream: self, transform: transform)
    }
}
