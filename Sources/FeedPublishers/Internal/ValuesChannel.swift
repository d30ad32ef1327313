import Synchronization

/// The subscriber behind `values`: a buffer filled on the sender's thread and emptied by the iterator.
final class ValuesChannel<Output: Sendable, Failure: Error>: Subscriber {
    typealias Input = Output

    enum Take {
        case values
        case empty
        case finished
        case failed(Failure)
    }

    private struct State {
        var buffer: [Output] = []
        var head = 0
        var completion: Subscribers.Completion<Failure>?
        var ended = false
        var subscription: (any Subscription)?
        var waiter: UnsafeContinuation<Void, Never>?

        var pending: Int { buffer.count - head }
    }

    private let state = Mutex(State())
    private let policy: ValuesBufferingPolicy
    private let drops = Atomic<Int>(0)
    private let sharedDrops: DropCounter

    init(policy: ValuesBufferingPolicy, sharedDrops: DropCounter) {
        self.policy = policy
        self.sharedDrops = sharedDrops
    }

    var droppedCount: Int {
        drops.load(ordering: .relaxed)
    }

    // MARK: - Subscriber

    func receive(subscription: any Subscription) {
        let accepted = state.withLock(annotating: self) { state -> Bool in
            guard !state.ended, state.subscription == nil else { return false }
            state.subscription = subscription
            return true
        }
        if accepted {
            subscription.request(.unlimited)
        } else {
            subscription.cancel()
        }
    }

    func receive(_ input: Output) -> Subscribers.Demand {
        var dropped = false
        let waiter = state.withLock(annotating: self) { state -> UnsafeContinuation<Void, Never>? in
            guard !state.ended, state.completion == nil else { return nil }
            switch policy {
            case .unbounded:
                state.buffer.append(input)
            case .bounded(let limit, let overflow):
                if state.pending < limit {
                    state.buffer.append(input)
                } else if overflow == .dropNewest || limit == 0 {
                    dropped = true
                } else {
                    state.head += 1
                    state.buffer.append(input)
                    dropped = true
                    if state.head >= limit {
                        state.buffer.removeFirst(state.head)
                        state.head = 0
                    }
                }
            }
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        if dropped {
            drops.wrappingAdd(1, ordering: .relaxed)
            sharedDrops.count.wrappingAdd(1, ordering: .relaxed)
        }
        waiter?.resume()
        return .none
    }

    func receive(completion: Subscribers.Completion<Failure>) {
        let waiter = state.withLock(annotating: self) { state -> UnsafeContinuation<Void, Never>? in
            guard !state.ended, state.completion == nil else { return nil }
            state.completion = completion
            state.subscription = nil
            let waiter = state.waiter
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    // MARK: - Consumer side

    /// Moves every buffered value into `batch` (handing back the consumed array's storage).
    func take(into batch: inout [Output], index: inout Int) -> Take {
        state.withLock(annotating: self) { state -> Take in
            if state.head < state.buffer.count {
                batch.removeAll(keepingCapacity: true)
                swap(&batch, &state.buffer)
                index = state.head
                state.head = 0
                return .values
            }
            if state.ended { return .finished }
            guard let completion = state.completion else { return .empty }
            state.ended = true
            state.buffer = []
            switch completion {
            case .finished: return .finished
            case .failure(let error): return .failed(error)
            }
        }
    }

    /// Suspends until a value, a completion or cancellation arrives; task cancellation cancels the subscription.
    func waitForWork() async {
        await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                let resumeNow = state.withLock(annotating: self) { state -> Bool in
                    if state.head < state.buffer.count || state.completion != nil || state.ended { return true }
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            cancel()
        }
    }

    /// Ends the iteration and cancels the upstream subscription.
    func cancel() {
        let (subscription, waiter) = state.withLock(annotating: self) { state -> ((any Subscription)?, UnsafeContinuation<Void, Never>?) in
            state.ended = true
            state.buffer = []
            state.head = 0
            let taken = (state.subscription, state.waiter)
            state.subscription = nil
            state.waiter = nil
            return taken
        }
        subscription?.cancel()
        waiter?.resume()
    }
}
