internal import FeedPublishers
internal import Foundation

/// Runs a projection's actions one at a time, in send order, on the projection's own serial executor (a
/// ``FeedExecutor``).
///
/// Processing an action reduces it (under the state lock), publishes the new state, runs the effects it asked for
/// and processes their answers the same way, depth first, before the next action. All of it runs on the
/// projection's queue.
///
/// - ``send(_:)`` from a thread off the library's executors (a UI thread, a request handler, a test) waits until
///   its action and everything it caused were applied: the projection's state is right when it returns.
/// - ``send(_:)`` from inside a callback — a state subscriber of this or another projection, an effect, a
///   subscriber of the event bridge — queues the action and returns: code on an executor never waits for another
///   (see ``FeedExecutor``). An action sent from this projection's own callbacks runs after the current one.
/// - ``apply(_:)`` is the delivery executor's: it waits until the projection applied the event (the one wait the
///   delivery executor makes; a projection's queue waits for nothing but the database), so once a seq is delivered
///   (``EventBridge/waitForDelivery(through:timeout:)``) every projection subscribed to the bridge shows it. GCD runs
///   the work on the delivering thread when the projection is idle, so an event costs no thread hand-off; a
///   projection busy with a slow effect delays later deliveries, which the delivery backlog's bound covers.
///
/// `@unchecked Sendable`: `state` is guarded by `stateLock`; `reentrant` is only touched on `queue`; `reduce`,
/// `run` and `publish` are immutable closures.
final class ActionLoop<State: Sendable, Action: Sendable, Effect: Sendable>: @unchecked Sendable {
    /// A published state; internal, so the publishing closure cannot be cast and called from outside the module.
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
    private let queue = FeedExecutor.makeQueue(label: "FeedSync.Projection")
    /// Marks `queue`, to recognise a send from this projection's own callbacks.
    private let ownQueue = DispatchSpecificKey<Bool>()
    /// Actions sent from this projection's own callbacks while an action runs; applied after it (on `queue`).
    private var reentrant: [Action] = []

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
        queue.setSpecific(key: ownQueue, value: true)
    }

    /// The current state.
    var current: State {
        stateLock.lock()
        defer { stateLock.unlock() }
        return state
    }

    /// Applies `action`; see the type's documentation for when this waits.
    func send(_ action: Action) {
        if DispatchQueue.getSpecific(key: ownQueue) == true {
            reentrant.append(action)
        } else if FeedExecutor.isCurrent {
            queue.async { self.process(action) }
        } else {
            queue.sync { process(action) }
        }
    }

    /// Applies an event's action for the delivery executor: waits for the projection's queue and returns once the
    /// action and everything it caused were processed.
    func apply(_ action: Action) {
        queue.sync { process(action) }
    }

    /// Processes `action`, then what this projection's callbacks sent meanwhile. Runs on `queue`.
    private func process(_ action: Action) {
        var next: Action? = action
        while let current = next {
            processOne(current)
            next = reentrant.isEmpty ? nil : reentrant.removeFirst()
        }
    }

    private func processOne(_ action: Action) {
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
}
