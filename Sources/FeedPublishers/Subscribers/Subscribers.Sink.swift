import Synchronization

extension Subscribers {
    /// A subscriber that requests unlimited values and hands each one, and the completion, to closures.
    ///
    /// `sink` creates one and returns it wrapped in an ``AnyCancellable``. The closures run on
    /// the thread that sends (use `receive(on:)` to move them). The sink drops its
    /// subscription on cancel or completion, breaking the subscription ↔ subscriber cycle.
    public final class Sink<Input, Failure: Error>: Subscriber, Cancellable, Sendable {
        private enum State {
            case awaitingSubscription
            case subscribed(any Subscription)
            case terminal
        }

        /// The closure called with every value.
        public let receiveValue: @Sendable (Input) -> Void

        /// The closure called with the completion.
        public let receiveCompletion: @Sendable (Subscribers.Completion<Failure>) -> Void

        private let state = Mutex(State.awaitingSubscription)

        /// Creates a sink from two closures.
        ///
        /// - Parameters:
        ///   - receiveCompletion: Called once with the completion.
        ///   - receiveValue: Called with every value.
        public init(
            receiveCompletion: @escaping @Sendable (Subscribers.Completion<Failure>) -> Void,
            receiveValue: @escaping @Sendable (Input) -> Void
        ) {
            self.receiveCompletion = receiveCompletion
            self.receiveValue = receiveValue
        }

        /// Keeps the subscription and requests unlimited values; a second subscription is cancelled.
        public func receive(subscription: any Subscription) {
            let accepted = state.withLock(annotating: self) { state -> Bool in
                guard case .awaitingSubscription = state else { return false }
                state = .subscribed(subscription)
                return true
            }
            if accepted {
                subscription.request(.unlimited)
            } else {
                subscription.cancel()
            }
        }

        /// Passes the value to `receiveValue`.
        public func receive(_ input: Input) -> Subscribers.Demand {
            receiveValue(input)
            return .none
        }

        /// Passes the completion to `receiveCompletion` and drops the subscription.
        public func receive(completion: Subscribers.Completion<Failure>) {
            state.withLock(annotating: self) { $0 = .terminal }
            receiveCompletion(completion)
        }

        /// Cancels the subscription; no value reaches the closures after this returns.
        public func cancel() {
            let subscription = state.withLock(annotating: self) { state -> (any Subscription)? in
                defer { state = .terminal }
                if case .subscribed(let subscription) = state { return subscription }
                return nil
            }
            subscription?.cancel()
        }
    }
}
