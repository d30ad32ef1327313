extension Publishers {
    /// A publisher that transforms upstream values and forwards only the non-`nil` results.
    public struct CompactMap<Upstream: Publisher, Output>: Publisher {
        /// The upstream's failure type.
        public typealias Failure = Upstream.Failure

        /// The publisher whose values are transformed.
        public let upstream: Upstream

        /// The transformation; a `nil` result drops the value.
        public let transform: @Sendable (Upstream.Output) -> Output?

        /// Creates the operator; prefer `upstream.compactMap(_:)`.
        public init(upstream: Upstream, transform: @escaping @Sendable (Upstream.Output) -> Output?) {
            self.upstream = upstream
            self.transform = transform
        }

        /// Subscribes to the upstream with a subscriber that forwards non-`nil` results.
        public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
            upstream.receive(subscriber: Inner(downstream: subscriber, transform: transform))
        }

        /// Asks for one more value for every value it drops, so the downstream's demand is kept.
        struct Inner<Downstream: Subscriber>: Subscriber
        where Downstream.Input == Output, Downstream.Failure == Upstream.Failure {
            let downstream: Downstream
            let transform: @Sendable (Upstream.Output) -> Output?

            func receive(subscription: any Subscription) {
                downstream.receive(subscription: subscription)
            }

            func receive(_ input: Upstream.Output) -> Subscribers.Demand {
                guard let output = transform(input) else { return .max(1) }
                return downstream.receive(output)
            }

            func receive(completion: Subscribers.Completion<Upstream.Failure>) {
                downstream.receive(completion: completion)
            }
        }
    }
}

extension Publishers.CompactMap: Sendable where Upstream: Sendable {}

extension Publisher {
    /// Transforms every value and forwards only the non-`nil` results.
    ///
    /// ```swift
    /// strings.compactMap { Int($0) }.sink { print($0) }
    /// ```
    public func compactMap<T>(_ transform: @escaping @Sendable (Output) -> T?) -> Publishers.CompactMap<Self, T> {
        Publishers.CompactMap(upstream: self, transform: transform)
    }
}
