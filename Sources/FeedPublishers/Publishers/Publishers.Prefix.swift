import Synchronization

extension Publishers {
    /// A publisher that forwards at most `maxLength` values, then finishes and cancels the upstream.
    ///
    /// Combine calls this type `Publishers.Output`; the operator is the same `prefix(_:)`.
    public struct Prefix<Upstream: Publisher>: Publisher {
        /// The upstream's value type.
        public typealias Output = Upstream.Output

        /// The upstream's failure type.
        public typealias Failure = Upstream.Failure

        /// The publisher whose first values are forwarded.
        public let upstream: Upstream

        /// How many values to forward before finishing.
        public let maxLength: Int

        /// Creates the operator; prefer `upstream.prefix(_:)`.
        public init(upstream: Upstream, maxLength: Int) {
            precondition(maxLength >= 0, "API Violation: prefix length must not be negative")
            self.upstream = upstream
            self.maxLength = maxLength
        }

        /// Subscribes to the upstream with a subscriber that finishes after `maxLength` values.
        public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
            upstream.receive(subscriber: Inner(downstream: subscriber, maxLength: maxLength))
        }

        /// Counts values under a mutex and finishes once the count is reached.
        final class Inner<Downstream: Subscriber>: Subscriber
        where Downstream.Input == Upstream.Output, Downstream.Failure == Upstream.Failure {
            struct State {
                var remaining: Int
                var subscription: (any Subscription)?
                var done = false
            }

            let downstream: Downstream
            let state: Mutex<State>

            init(downstream: Downstream, maxLength: Int) {
                self.downstream = downstream
                state = Mutex(State(remaining: maxLength))
            }

            func receive(subscription: any Subscription) {
                let finishAtOnce = state.withLock(annotating: self) { state -> Bool in
                    state.subscription = subscription
                    if state.remaining == 0 {
                        state.done = true
                        state.subscription = nil
                        return true
                    }
                    return false
                }
                downstream.receive(subscription: subscription)
                if finishAtOnce {
                    subscription.cancel()
                    downstream.receive(completion: .finished)
                }
            }

            func receive(_ input: Upstream.Output) -> Subscribers.Demand {
                let step = state.withLock(annotating: self) { state -> (deliver: Bool, finish: (any Subscription)??) in
                    guard !state.done else { return (false, nil) }
                    state.remaining -= 1
                    guard state.remaining == 0 else { return (true, nil) }
                    state.done = true
                    let subscription = state.subscription
                    state.subscription = nil
                    return (true, .some(subscription))
                }
                guard step.deliver else { return .none }
                let demand = downstream.receive(input)
                if case .some(let subscription) = step.finish {
                    subscription?.cancel()
                    downstream.receive(completion: .finished)
                    return .none
                }
                return demand
            }

            func receive(completion: Subscribers.Completion<Upstream.Failure>) {
                let forward = state.withLock(annotating: self) { state -> Bool in
                    guard !state.done else { return false }
                    state.done = true
                    state.subscription = nil
                    return true
                }
                if forward { downstream.receive(completion: completion) }
            }
        }
    }
}

extension Publishers.Prefix: Sendable where Upstream: Sendable {}

extension Publisher {
    /// Forwards at most `maxLength` values, then finishes and cancels the upstream.
    ///
    /// ```swift
    /// events.prefix(1).sink { print("first: \($0)") }
    /// ```
    public func prefix(_ maxLength: Int) -> Publishers.Prefix<Self> {
        Publishers.Prefix(upstream: self, maxLength: maxLength)
    }
}
