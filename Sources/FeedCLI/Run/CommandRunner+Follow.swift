internal import FeedSync

extension CommandRunner {
    /// `events --follow`: prints the backlog, then every event committed by any process as ``ChangeFeed`` publishes
    /// it, each once and in seq order, flushed line by line; Ctrl-C ends it with status 0, a deleted or replaced
    /// database file with status 74.
    func follow(_ command: EventsCommand, service: FeedService) async throws(CLIError) -> ExitCode {
        let printer = EventPrinter(runner: self, after: command.since, limit: command.limit)
        let stop = StopSignal()
        let subscription = service.bridge.changes.sink { event in
            if printer.print(event) { stop.fire() }
        }
        let backlog = try attempt { () throws(FeedError) in try service.events(after: command.since, limit: command.limit) }
        try refusePruned(backlog, since: command.since)
        try refuseBeyondHead(backlog, since: command.since, service: service)
        if !json { console.line(context.style.bold(TextShapes.eventHeader)) }
        for event in backlog where printer.print(event) { stop.fire() }
        let live = try LiveChanges(service: service) {
            printer.halt()
            stop.fire()
        }
        // Events committed after the backlog read and before the feed started are published by `start()`; the
        // printer drops any seq it has already printed.
        await stop.wait()
        live.stop()
        subscription.cancel()
        if let failure = live.failure { throw failure }
        return .success
    }
}
