internal import FeedPublishers
internal import Foundation

/// Runs a projection's actions one at a time, in the order their senders got their turn.
///
/// ``send(_:)`` processes its action **on the calling thread**, whichever thread that is (a UI thread, a request
/// handler, the projection's bridge queue applying an event, a state subscriber, a durable subscriber's handler): it takes
/// the projection's turn, reduces the action (under the state lock), runs the effects it asked for (a command or a
/// read, which wait only for the database) and processes their answers the same way, depth first, then gives the
/// turn up. So the projection's state is right when `send` returns, wherever it was called from.
///
/// State subscribers never run on a sender's thread: each new state is handed to the projection's own serial
/// executor, `FeedSync.Projection`, which publishes the states in the order they were reduced. A turn therefore
/// waits only for the database, never for subscriber code, and a subscriber may call `send` on this or any other
/// projection. When more than ``publishLimit`` states wait for a slow subscriber, the oldest waiting are skipped: it
/// always gets the newest state, and memory stays bounded.
///
/// An effect that sends to its own projection (it runs inside the turn) does not wait for itself: its action runs
/// right after the current one, before the turn is given up.
///
/// `@unchecked Sendable`: everything mutable is in `shared`, guarded by its lock; `turn` serializes processing;
/// `reduce`, `run` and `publish` are immutable closures.
final class ActionLoop<State: Sendable, Action: Sendable, Effect: Sendable>: @unchecked Sendable {
    /// A published state; internal, so the publishing closure cannot be cast and called from outside the module.
    struct Snapshot {
        let state: State
    }

    /// What the loop's threads share.
    struct Shared {
        var state: State
        /// The thread holding `turn`, to recognise a send from inside its own effects.
        var owner: pthread_t?
        /// Actions sent from inside this projection's own effects; processed after the current one, in the same turn.
        var reentrant: [Action] = []
        /// States reduced but not yet published, oldest first.
        var unpublished: [State] = []
        /// Whether `publisher` has a pass queued or running that will publish `unpublished`.
        var isPublishing = false
    }

    /// How many states may wait for a slow state subscriber before the oldest are skipped: as many as events wait
    /// in memory for a slow bridge subscriber, so a projection that keeps up with delivery publishes every state.
    static var publishLimit: Int { EventSequencer.defaultLimit }

    /// Held by the thread processing an action and everything it caused.
    private let turn = NSLock()
    private let shared: Locked<Shared>
    private let reduce: @Sendable (inout State, Action) -> [Effect]
    private let run: @Sendable (Effect) -> Action?
    // The state subject is captured by this closure only, so no stored property leads to a sender.
    private let publish: @Sendable (Snapshot) -> Void
    /// A read-only handle on the state subject; its `value` reads `shared`.
    let statePublisher: StatePublisher<State>
    /// Where state subscribers run.
    private let publisher = DispatchQueue(label: "FeedSync.Projection")

    init(
        initial: State,
        reduce: @escaping @Sendable (inout State, Action) -> [Effect],
        run: @escaping @Sendable (Effect) -> Action?
    ) {
        let shared = Locked(Shared(state: initial))
        self.shared = shared
        self.reduce = reduce
        self.run = run
        let subject = CurrentValuePublisher<State, Never>(initial)
        publish = { subject.send($0.state) }
        statePublisher = StatePublisher(subject, current: { shared.withLock { $0.state } })
    }

    /// The current state: every action whose `send` returned is applied.
    var current: State {
        shared.withLock { $0.state }
    }

    /// Applies `action` and everything it caused, on the calling thread, then returns.
    func send(_ action: Action) {
        let isOwnEffect = shared.withLock { shared -> Bool in
            guard let owner = shared.owner, pthread_equal(owner, pthread_self()) != 0 else { return false }
            shared.reentrant.append(action)
            return true
        }
        if isOwnEffect { return }
        turn.lock()
        shared.withLock { $0.owner = pthread_self() }
        defer {
            shared.withLock { $0.owner = nil }
            turn.unlock()
        }
        var next: Action? = action
        while let current = next {
            processOne(current)
            next = shared.withLock { $0.reentrant.isEmpty ? nil : $0.reentrant.removeFirst() }
        }
    }

    private func processOne(_ action: Action) {
        var pending = [action]
        while let next = pending.popLast() {
            let (effects, schedule) = shared.withLock { shared -> ([Effect], Bool) in
                let effects = reduce(&shared.state, next)
                if shared.unpublished.count >= Self.publishLimit { shared.unpublished.removeFirst() }
                shared.unpublished.append(shared.state)
                defer { shared.isPublishing = true }
                return (effects, !shared.isPublishing)
            }
            if schedule { publisher.async { self.publishPending() } }
            var answers: [Action] = []
            for effect in effects {
                if let answer = run(effect) { answers.append(answer) }
            }
            // Answers belong to the action just processed: they go before anything queued, in effect order.
            pending.append(contentsOf: answers.reversed())
        }
    }

    /// Publishes the reduced states in order until none is left, taking all that wait at once. Runs on `publisher`.
    private func publishPending() {
        while true {
            let waiting = shared.withLock { shared -> [State] in
                let waiting = shared.unpublished
                shared.unpublished = []
                if waiting.isEmpty { shared.isPublishing = false }
                return waiting
            }
            guard !waiting.isEmpty else { return }
            for state in waiting { publish(Snapshot(state: state)) }
        }
    }
}
