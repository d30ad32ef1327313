internal import FeedSync
internal import Synchronization

extension CommandRunner {
    /// `events --follow`: prints the backlog, then every event committed by any process as ``ChangeFeed`` publishes
    /// it, each once and in seq order, flushed line by line; Ctrl-C ends it with status 0.
    func follow(_ command: EventsCommand, service: FeedService) async throws(CLIError) -> ExitCode {
        let printer = EventPrinter(runner: self, after: command.since, limit: command.limit)
        let stop = StopSignal()
        let subscription = service.bridge.changes.sink { event in
            if printer.print(event) { stop.fire() }
        }
        let backlog = try attempt { () throws(FeedError) in try service.events(after: command.since, limit: command.limit) }
        if !json { console.line(context.style.bold(TextShapes.eventHeader)) }
        for event in backlog where printer.print(event) { stop.fire() }
        let live = try LiveChanges(service: service)
        // Events committed after the backlog read and before the feed started are published by `start()`; the
        // printer drops any seq it has already printed.
        await stop.wait()
        live.stop()
        subscription.cancel()
        return .success
    }
}

/// Prints events with a seq above the last printed one, under a lock, counting towards an optional limit.
final class EventPrinter: Sendable {
    private struct State {
        var lastPrinted: Int64
        var printed = 0
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
            guard event.seq > state.lastPrinted else { return false }
            state.lastPrinted = event.seq
            state.printed += 1
            // Printing under the lock keeps lines in seq order when the backlog and the feed's thread overlap.
            runner.console.line(runner.eventLine(event))
            if let limit { return state.printed >= limit }
            return false
        }
    }
}
