internal import FeedSync

extension CommandRunner {
    /// `watch`: the feed, redrawn whenever it changes (here or in another process) until Ctrl-C. On a terminal the
    /// screen is cleared and redrawn; into a pipe each new frame follows a blank line, flushed at once. A deleted or
    /// replaced database file ends it with status 74.
    func watch(_ command: FeedCommand) async throws(CLIError) -> ExitCode {
        let (service, viewer) = try context.openService(follows: true, actingUser: false)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        if let viewer { _ = try attempt { () throws(FeedError) in try service.feedPage(viewerID: viewer, limit: 1) } }
        let stop = StopSignal()
        let live = try LiveChanges(service: service) { stop.fire() }
        let renderer = WatchRenderer(runner: self, viewer: viewer)
        await withDependencies {
            $0.feedClient = .live(service)
        } operation: {
            let feed = FeedListProjection(viewerID: viewer, pageSize: command.limit)
            let subscription = feed.state.sink { state in renderer.render(state) }
            feed.send(.refresh)
            await stop.wait()
            subscription.cancel()
        }
        live.stop()
        if let failure = live.failure { throw failure }
        return .success
    }
}
