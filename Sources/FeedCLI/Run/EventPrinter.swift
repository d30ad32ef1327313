internal import FeedSync
internal import Synchronization

/// Prints events with a seq above the last printed one, under a lock, counting towards an optional limit.
final class EventPrinter: Sendable {
    private struct State {
        var lastPrinted: Int64
        var printed = 0
        /// Set once following failed: nothing more is printed.
        var halted = false
    }

    private let runner: CommandRunner
    private let limit: Int?
    private let state: Mutex<State>

    init(runner: CommandRunner, after seq: Int64, limit: Int?) {
        self.runner = runner
        self.limit = limit
        state = Mutex(State(lastPrinted: seq))
    }

    /// Prints `event` unless it was printed already or the limit was reached; returns whether the limit is reached.
    func print(_ event: EventRecord) -> Bool {
        state.withLock { state in
            if let limit, state.printed >= limit { return true }
            if state.halted { return false }
            guard event.seq > state.lastPrinted else { return false }
            state.lastPrinted = event.seq
            state.printed += 1
            // Printing under the lock keeps lines in seq order when the backlog and the feed's thread overlap.
            runner.console.line(runner.eventLine(event))
            if let limit { return state.printed >= limit }
            return false
        }
    }

    /// Prints nothing more: following failed (the log was rewritten), and what the feed publishes next continues
    /// another history.
    func halt() {
        state.withLock { $0.halted = true }
    }
}
