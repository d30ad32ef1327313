internal import Foundation
internal import FeedPublishers

/// Runs a projection's actions one at a time, in order: reduce under the lock, then publish and run effects outside.
///
/// An action sent from inside the loop (an effect's answer, an event delivered while a state subscriber runs) is
/// queued and processed by the running loop before the outermost `send` returns; a `send` from another thread
/// while the loop runs waits until its action was processed. So when `send` returns, the action and everything
/// it caused have been applied.
///
/// `@unchecked Sendable`: `state`, `queue`, `processed`, `nextID`, `running` and `runningThread` are guarded by
/// `condition`; `reduce` and `run` are immutable closures.
final class ActionLoop<State: Sendable, Action: Sendable, Effect: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var state: State
    private var queue: [(id: UInt64, action: Action)] = []
    private var nextID: UInt64 = 0
    private var processed: UInt64 = 0
    private var running = false
    private var runningThread: pthread_t?
    private let reduce: @Sendable (inout State, Action) -> [Effect]
    private let run: @Sendable (Effect) -> Action?
    let subject: CurrentValuePublisher<State, Never>

    init(
        initial: State,
        reduce: @escaping @Sendable (inout State, Action) -> [Effect],
        run: @escaping @Sendable (Effect) -> Action?
    ) {
        state = initial
        self.reduce = reduce
        self.run = run
        subject = CurrentValuePublisher(initial)
    }

    var current: State {
        condition.lock()
        defer { condition.unlock() }
        return state
    }

    func send(_ action: Action) {
        condition.lock()
        nextID += 1
        let id = nextID
        queue.append((id, action))
        while processed < id {
            if running {
                if let runningThread, pthread_equal(runningThread, pthread_self()) != 0 { break }
                condition.wait()
            } else {
                drain()
            }
        }
        condition.unlock()
    }

    /// Called and returns with `condition` locked.
    private func drain() {
        running = true
        runningThread = pthread_self()
        while !queue.isEmpty {
            let (id, action) = queue.removeFirst()
            let effects = reduce(&state, action)
            let snapshot = state
            condition.unlock()
            subject.send(snapshot)
            var answers: [Action] = []
            for effect in effects {
                if let answer = run(effect) { answers.append(answer) }
            }
            condition.lock()
            // Answers go first: they belong to the action just processed. They carry id 0: nobody waits on them,
            // and external actions keep being processed in send order, so `processed` only grows.
            for answer in answers.reversed() {
                queue.insert((0, answer), at: 0)
            }
            if id > 0 { processed = id }
            condition.broadcast()
        }
        processed = nextID
        running = false
        runningThread = nil
        condition.broadcast()
    }
}
