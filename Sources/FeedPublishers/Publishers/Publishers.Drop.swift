import Synchronization

extension Publishers {
    /// A publisher that omits the first `count` upstream values.
    public struct Drop<Upstream: Publisher>: Publisher {
        /// The upstream's value type.
        public typealias Output = Upstream.Output

        /// The upstream's failure type.
        public typealias Failure = Upstream.Failure

        /// The publisher whose first values are dropped.
        public let upstream: Upstream

        /// How many values to drop.
        public let count: Int

        /// Creates the operator; prefer `upstream.dropFirst(_:)`.
        public init(upstream: Upstream, count: Int) {
            precondition(count >= 0, "API Violation: dropFirst count must not be negative")
            self.upstream = upstream
            self.count = count
        }

        /// Subscribes to the upstream with a subscriber that counts down before forwarding.
        public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
            upstream.receive(subscriber: Inner(downstream: subscriber, count: count))
        }

        /// Counts down atomically; each dropped value asks for one replacement.
        final class Inner<Downstream: Subscriber>: Subscriber
        where Downstream.Input == Upstream.Output, Downstream.Failure == Upstream.Failure {
            let downstream: Downstream
            let remaining: Atomic<Int>

            init(downstream: Downstream, count: Int) {
                self.downstream = downstream
                remaining = Atomic(count)
            }

            func receive(subscription: any Subscription) {
                downstream.receive(subscription: subscription)
            }

            func receive(_ input: Upstream.Output) -> Subscribers.Demand {
                var left = remaining.load(ordering: .relaxed)
                while left > 0 {
                    let (exchanged, original) = remaining.compareExchange(
                        expected: left, desired: left - 1, ordering: .relaxed)
                    if exchanged { return .max(1) }
                    left = original
                }
                return downstream.receive(input)
            }

            func receive(completion: Subscribers.Completion<Upstream.Failure>) {
                downstream.receive(completion: completion)
            }
        }
    }
}

extension Publishers.Drop: Sendable where Upstream: Sendable {}

extension Publisher {
    /// Omits the first `count` values (one by default).
    ///
    /// ```swift
    /// currentValue.dropFirst().sink { print("changed to \($0)") }
    /// ```
    public func dropFirst(_ count: Int = 1) -> Publishers.Drop<Self> {
        Publishers.Drop(upstream: self, count: count)
    }
}
