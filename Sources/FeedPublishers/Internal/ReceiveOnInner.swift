import Synchronization

/// The subscriber/subscription pair behind `receive(on:)`: an ordered buffer drained on a scheduler.
final class ReceiveOnInner<Downstream: Subscriber>: Subscriber, Subscription
where Downstream.Input: Sendable {
    typealias Input = Downstream.Input
    typealias Failure = Downstream.Failure

    private struct State {
        var upstream: (any Subscription)?
        var buffer: [Input] = []
        var head = 0
        var completion: Subscribers.Completion<Failure>?
        var demand: Subscribers.Demand = .none
        var draining = false
        var downstreamSubscribed = false
        var terminated = false

        var hasWork: Bool {
            (head < buffer.count && demand > 0) || (head == buffer.count && completion != nil)
        }

        /// Claims the drain if there is work and nobody drains yet.
        mutating func claimDrain() -> Bool {
            guard downstreamSubscribed, !draining, !terminated, hasWork else { return false }
            draining = true
            return true
        }
    }

    private enum Step {
        case value(Input)
        case completion(Subscribers.Completion<Failure>)
        case stop
    }

    private let downstream: Downstream
    private let enqueue: @Sendable (@escaping @Sendable () -> Void) -> Void
    private let state = Mutex(State())

    init(downstream: Downstream, enqueue: @escaping @Sendable (@escaping @Sendable () -> Void) -> Void) {
        self.downstream = downstream
        self.enqueue = enqueue
    }

    // MARK: - Subscriber (upstream side, any thread)

    func receive(subscription: any Subscription) {
        let accepted = state.withLock(annotating: self) { state -> Bool in
            guard state.upstream == nil, !state.terminated else { return false }
            state.upstream = subscription
            return true
        }
        guard accepted else {
            subscription.cancel()
            return
        }
        subscription.request(.unlimited)
        enqueue { [self] in
            downstream.receive(subscription: self)
            let drain = state.withLock(annotating: self) { state -> Bool in
                state.downstreamSubscribed = true
                return state.claimDrain()
            }
            if drain { self.drain() }
        }
    }

    func receive(_ input: Input) -> Subscribers.Demand {
        let schedule = state.withLock(annotating: self) { state -> Bool in
            guard !state.terminated, state.completion == nil else { return false }
            state.buffer.append(input)
            return state.claimDrain()
        }
        if schedule { enqueue { [self] in drain() } }
        return .none
    }

    func receive(completion: Subscribers.Completion<Failure>) {
        let schedule = state.withLock(annotating: self) { state -> Bool in
            guard !state.terminated, state.completion == nil else { return false }
            state.completion = completion
            state.upstream = nil
            return state.claimDrain()
        }
        if schedule { enqueue { [self] in drain() } }
    }

    // MARK: - Subscription (downstream side)

    func request(_ demand: Subscribers.Demand) {
        guard demand > 0 else { return }
        let schedule = state.withLock(annotating: self) { state -> Bool in
            state.demand += demand
            return state.claimDrain()
        }
        if schedule { enqueue { [self] in drain() } }
    }

    func cancel() {
        let upstream = state.withLock(annotating: self) { state -> (any Subscription)? in
            state.terminated = true
            state.buffer = []
            state.head = 0
            let upstream = state.upstream
            state.upstream = nil
            return upstream
        }
        upstream?.cancel()
    }

    // MARK: - Draining (on the scheduler)

    private func drain() {
        while true {
            let step = state.withLock(annotating: self) { state -> Step in
                if state.terminated {
                    state.draining = false
                    return .stop
                }
                if state.head < state.buffer.count, state.demand > 0 {
                    let value = state.buffer[state.head]
                    state.head += 1
                    state.demand -= 1
                    if state.head == state.buffer.count {
                        state.buffer.removeAll(keepingCapacity: true)
                        state.head = 0
                    }
                    return .value(value)
                }
                if state.head == state.buffer.count, let completion = state.completion {
                    state.terminated = true
                    state.draining = false
                    return .completion(completion)
                }
                state.draining = false
                return .stop
            }
            switch step {
            case .value(let value):
                let more = downstream.receive(value)
                if more > 0 { state.withLock(annotating: self) { $0.demand += more } }
            case .completion(let completion):
                downstream.receive(completion: completion)
                return
            case .stop:
                return
            }
        }
    }
}
