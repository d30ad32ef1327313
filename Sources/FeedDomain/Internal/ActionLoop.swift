internal import FeedPublishers
internal import Foundation

/// Runs a projection's actions one at a time, in send order, on a ``SerialDrain`` at ``DrainLevel/projection``.
///
/// Processing an action reduces it (under the state lock), publishes the new state, runs the effects it asked for
/// and processes their answers the same way, depth first, before the next queued action. All of it runs outside
/// the drain's lock, on the thread that drains.
///
/// `send` from a thread that runs no library callback waits until its action and everything it caused were
/// applied. `send` from inside a callback — a state subscriber of this or another projection, an effect, a
/// subscriber of the event bridge — never waits for another thread: when the loop is idle it runs the action at
/// once on the calling thread; when the loop runs on another thread it queues the action, which that thread
/// applies before its own `send` returns (see "Threading contract" in `Docs/Architecture.md`).
///
/// `@unchecked Sendable`: `state` is guarded by `stateLock`; the queue is guarded by the drain's lock; `reduce`,
/// `run` and `publish` are immutable closures.
final class ActionLoop<State: Sendable, Action: Sendable, Effect: Sendable>: @unchecked Sendable {
    /// A queued action; internal, so the drain's closure cannot be cast and called from outside the module.
    struct Queued {
        let id: UInt64
        let action: Action
    }

    /// A published state; internal for the same reason.
    struct Snapshot {
        let state: State
    }

    private let stateLock = NSLock()
    private var state: State
    private let reduce: @Sendable (inout State, Action) -> [Effect]
    private let run: @Sendable (Effect) -> Action?
    // The state subject is captured by these two closures only, so no stored property leads to a sender.
    private let publish: @Sendable (Snapshot) -> Void
    /// A read-only handle on the state subject.
    let statePublisher: StatePublisher<State>
    private var drain: SerialDrain<Backlog>!

    init(
        initial: State,
        reduce: @escaping @Sendable (inout State, Action) -> [Effect],
        run: @escaping @Sendable (Effect) -> Action?
    ) {
        state = initial
        self.reduce = reduce
        self.run = run
        let subject = CurrentValuePublisher<State, Never>(initial)
        publish = { subject.send($0.state) }
        statePublisher = StatePublisher(subject)
        drain = SerialDrain(level: .projection, backlog: Backlog()) { [unowned self] queued in
            self.process(queued.action)
        }
    }

    /// The current state.
    var current: State {
        stateLock.lock()
        defer { stateLock.unlock() }
        return state
    }

    /// Applies `action`; see the type's documentation for when this waits.
    func send(_ action: Action) {
        let id = drain.withBacklog { $0.append(action) }
        drain.run(until: id)
    }

    private func process(_ action: Action) {
        var pending = [action]
        while let next = pending.popLast() {
            stateLock.lock()
            let effects = reduce(&state, next)
            let snapshot = state
            stateLock.unlock()
            publish(Snapshot(state: snapshot))
            var answers: [Action] = []
            for effect in effects {
                if let answer = run(effect) { answers.append(answer) }
            }
            // Answers belong to the action just processed: they go before anything queued, in effect order.
            pending.append(contentsOf: answers.reversed())
        }
    }

    struct Backlog: DrainBacklog {
        private var queue: [Queued] = []
        private var head = 0
        private var nextID: UInt64 = 0
        private var processed: UInt64 = 0

        mutating func append(_ action: Action) -> UInt64 {
            nextID += 1
            queue.append(Queued(id: nextID, action: action))
            return nextID
        }

        mutating func next() -> Queued? {
            guard head < queue.count else {
                if head > 0 {
                    queue.removeAll(keepingCapacity: true)
                    head = 0
                }
                return nil
            }
            let item = queue[head]
            head += 1
            if head > 1024 && head * 2 > queue.count {
                queue.removeFirst(head)
                head = 0
            }
            return item
        }

        mutating func finish(_ work: Queued) {
            processed = work.id
        }

        func isDone(_ ticket: UInt64) -> Bool {
            processed >= ticket
        }
    }
}
