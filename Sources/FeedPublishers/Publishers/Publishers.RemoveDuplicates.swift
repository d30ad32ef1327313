import Synchronization

extension Publishers {
    /// A publisher that drops a value when it is a duplicate of the previous value forwarded or dropped.
    public struct RemoveDuplicates<Upstream: Publisher>: Publisher where Upstream.Output: Sendable {
        /// The upstream's value type.
        public typealias Output = Upstream.Output

        /// The upstream's failure type.
        public typealias Failure = Upstream.Failure

        /// The publisher whose repeated values are removed.
        public let upstream: Upstream

        /// Returns `true` when the second value duplicates the first (the previous value).
        public let predicate: @Sendable (Upstream.Output, Upstream.Output) -> Bool

        /// Creates the operator; prefer `upstream.removeDuplicates()` or `removeDuplicates(by:)`.
        public init(upstream: Upstream, predicate: @escaping @Sendable (Upstream.Output, Upstream.Output) -> Bool) {
            self.upstream = upstream
            self.predicate = predicate
        }

        /// Subscribes to the upstream with a subscriber that remembers the previous value.
        public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
            upstream.receive(subscriber: Inner(downstream: subscriber, predicate: predicate))
        }

        /// Keeps the previous value behind a mutex; the predicate runs outside the lock.
        final class Inner<Downstream: Subscriber>: Subscriber
        where Downstream.Input == Upstream.Output, Downstream.Failure == Upstream.Failure {
            let downstream: Downstream
            let predicate: @Sendable (Upstream.Output, Upstream.Output) -> Bool
            let previous = Mutex<Upstream.Output?>(nil)

            init(downstream: Downstream, predicate: @escaping @Sendable (Upstream.Output, Upstream.Output) -> Bool) {
                self.downstream = downstream
                self.predicate = predicate
            }

            func receive(subscription: any Subscription) {
                downstream.receive(subscription: subscription)
            }

            func receive(_ input: Upstream.Output) -> Subscribers.Demand {
                let last = previous.withLock(annotating: self) { stored -> Upstream.Output? in
                    let last = stored
                    stored = input
                    return last
                }
                if let last, predicate(last, input) { return .max(1) }
                return downstream.receive(input)
            }

            func receive(completion: Subscribers.Completion<Upstream.Failure>) {
                downstream.receive(completion: completion)
            }
        }
    }
}

extension Publishers.RemoveDuplicates: Sendable where Upstream: Sendable {}

extension Publisher where Output: Equatable & Sendable {
    /// Drops values equal to the previous value.
    ///
    /// ```swift
    /// [1, 1, 2, 2, 1] → 1, 2, 1
    /// ```
    public func removeDuplicates() -> Publishers.RemoveDuplicates<Self> {
        Publishers.RemoveDuplicates(upstream: self, predicate: ==)
    }
}

extension Publisher where Output: Sendable {
    /// Drops values that the predicate says duplicate the previous value.
    ///
    /// ```swift
    /// posts.removeDuplicates { $0.id == $1.id }
    /// ```
    public func removeDuplicates(
        by predicate: @escaping @Sendable (Output, Output) -> Bool
    ) -> Publishers.RemoveDuplicates<Self> {
        Publishers.RemoveDuplicates(upstream: self, predicate: predicate)
    }
}
