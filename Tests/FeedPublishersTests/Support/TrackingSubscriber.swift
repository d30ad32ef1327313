import FeedPublishers
import Synchronization

/// A subscriber that records every event and whose demand the test scripts exactly.
final class TrackingSubscriber<Input: Sendable & Equatable, Failure: Error & Equatable>: Subscriber {
    enum Event: Equatable {
        case subscribed
        case value(Input)
        case completion(Subscribers.Completion<Failure>)
    }

    private struct State {
        var subscription: (any Subscription)?
        var history: [Event] = []
    }

    private let state = Locked(State())
    private let initialDemand: Subscribers.Demand
    private let onValue: @Sendable (Input) -> Subscribers.Demand

    init(
        initialDemand: Subscribers.Demand = .none,
        onValue: @escaping @Sendable (Input) -> Subscribers.Demand = { _ in .none }
    ) {
        self.initialDemand = initialDemand
        self.onValue = onValue
    }

    var history: [Event] { state.withLock { $0.history } }

    var values: [Input] {
        history.compactMap { event in
            if case .value(let value) = event { return value }
            return nil
        }
    }

    var completions: [Subscribers.Completion<Failure>] {
        history.compactMap { event in
            if case .completion(let completion) = event { return completion }
            return nil
        }
    }

    func request(_ demand: Subscribers.Demand) {
        state.withLock { $0.subscription }?.request(demand)
    }

    func cancel() {
        state.withLock { $0.subscription }?.cancel()
    }

    func receive(subscription: any Subscription) {
        state.withLock { state in
            state.subscription = subscription
            state.history.append(.subscribed)
        }
        if initialDemand > 0 { subscription.request(initialDemand) }
    }

    func receive(_ input: Input) -> Subscribers.Demand {
        state.withLock { $0.history.append(.value(input)) }
        return onValue(input)
    }

    func receive(completion: Subscribers.Completion<Failure>) {
        state.withLock { $0.history.append(.completion(completion)) }
    }
}
