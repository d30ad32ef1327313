internal import FeedJSON
internal import FeedSync

extension CommandRunner {
    /// `events [--since SEQ] [--limit N] [--follow]`: the log after `since`; with `--follow`, then every new event
    /// from any process until Ctrl-C (or until `--limit` events in all were printed).
    func events(_ command: EventsCommand) async throws(CLIError) -> ExitCode {
        let service = try context.openService(create: false, follows: command.follow)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        if command.follow { return try await follow(command, service: service) }
        let events = try attempt { () throws(FeedError) in try service.events(after: command.since, limit: command.limit) }
        try refusePruned(events, since: command.since)
        try refuseBeyondHead(events, since: command.since, service: service)
        if json {
            printLines(events.map { JSONShapes.event($0).rendered })
        } else if events.isEmpty {
            console.error(command.since == 0 ? "The event log is empty." : "No events after seq \(command.since).")
        } else {
            printLines(TextShapes.events(events, style: context.style))
        }
        return .success
    }

    /// Refuses a `--since` older than what the log holds (status 66), rather than printing the log with a hole: seqs
    /// are gap-free, so a first event beyond `since + 1` means the events between were pruned. `--since 0` (the
    /// default) prints whatever the log holds.
    func refusePruned(_ events: [EventRecord], since: Int64) throws(CLIError) {
        guard since > 0, let first = events.first, first.seq > since + 1 else { return }
        throw CLIError(FeedError.historyPruned(after: since, prunedThrough: first.seq - 1))
    }

    /// Refuses a `--since` beyond the log's last seq (status 66): that seq was in another history of the log (before a
    /// failover to a standby that lacked it, or a restore), or another database's; waiting for it would print a
    /// different event under it.
    func refuseBeyondHead(_ events: [EventRecord], since: Int64, service: FeedService) throws(CLIError) {
        guard since > 0, events.isEmpty else { return }
        let head = try attempt { () throws(FeedError) in try service.logHead() }
        guard head < since else { return }
        throw CLIError(FeedError.historyRewritten(after: since, head: head))
    }

    /// One event line in the chosen format.
    func eventLine(_ event: EventRecord) -> String {
        json ? JSONShapes.event(event).rendered : TextShapes.event(event)
    }
}
