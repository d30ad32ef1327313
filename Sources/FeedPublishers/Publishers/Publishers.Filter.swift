extension Publishers {
    /// A publisher that forwards only the upstream values that satisfy a predicate.
    public struct Filter<Upstream: Publisher>: Publisher {
        /// The upstream's value type.
        public typealias Output = Upstream.Output

        /// The upstream's failure type.
        public typealias Failure = Upstream.Failure

        /// The publisher whose values are filtered.
        public let upstream: Upstream

        /// The predicate; values for which it returns `false` are dropped.
        public let isIncluded: @Sendable (Upstream.Output) -> Bool

        /// Creates the operator; prefer `upstream.filter(_:)`.
        public init(upstream: Upstream, isIncluded: @escaping @Sendable (Upstream.Output) -> Bool) {
            self.upstream = upstream
            self.isIncluded = isIncluded
        }

        /// Subscribes to the upstream with a subscriber that forwards matching values.
        public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
            upstream.receive(subscriber: Inner(downstream: subscriber, isIncluded: isIncluded))
        }

        /// Asks for one more value for every value it drops, so the downstream's demand is kept.
        struct Inner<Downstream: Subscriber>: Subscriber
        where Downstream.Input == Upstream.Output, Downstream.Failure == Upstream.Failure {
            let downstream: Downstream
            let isIncluded: @Sendable (Upstream.Output) -> Bool

            func receive(subscription: any Subscription) {
                downstream.receive(subscription: subscription)
            }

            func receive(_ input: Upstream.Output) -> Subscribers.Demand {
                isIncluded(input) ? downstream.receive(input) : .max(1)
            }

            func receive(completion: Subscribers.Completion<Upstream.Failure>) {
                downstream.receive(completion: completion)
            }
        }
    }
}

extension Publishers.Filter: Sendable where Upstream: Sendable {}

extension Publisher {
    /// Forwards only the values that satisfy a predicate.
    ///
    /// ```swift
    /// numbers.filter { $0.isMultiple(of: 2) }.sink { print($0) }
    /// ```
    public func filter(_ isIncluded: @escaping @Sendable (Output) -> Bool) -> Publishers.Filter<Self> {
        Publishers.Filter(upstream: self, isIncluded: isIncluded)
    }
}
