internal import FeedSync

extension CommandRunner {
    /// `app`: the interactive feed → detail → like → back flow, reading commands from stdin (a terminal or a pipe).
    /// A deleted or replaced database file ends it with status 74.
    func app(_ command: FeedCommand) async throws(CLIError) -> ExitCode {
        let (service, acting) = try context.openService(actingUser: true)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        let viewer = acting ?? ""
        // Fail early, with the usual message and status, when the viewer does not exist.
        _ = try attempt { () throws(FeedError) in try service.feedPage(viewerID: viewer, limit: 1) }
        let output = AppOutput(console: console, style: context.style, interactive: context.terminal.stdinIsTerminal)
        let adapter = ActionStreamAdapter<AppAction>()
        // Following cannot go on: end the session as if input had ended.
        let live = try LiveChanges(service: service) { adapter.finish() }
        let notices = service.bridge.changes.sink { event in
            guard event.userID != viewer, let postID = event.postID else { return }
            switch event.kind {
            case .liked where !event.userID.isEmpty, .unliked where !event.userID.isEmpty:
                let count = event.likeCount.map { $0 == 1 ? "1 like" : "\($0) likes" } ?? ""
                output.notice("· \(TextSanitizer.clean(event.userID)) \(event.kind.rawValue) \(TextSanitizer.clean(postID)) (\(count))")
            case .postCreated:
                output.notice("· \(TextSanitizer.clean(event.userID)) posted \(TextSanitizer.clean(postID))")
            case .likeCountChanged, .liked, .unliked:
                let count = event.likeCount.map { $0 == 1 ? "1 like" : "\($0) likes" } ?? ""
                output.notice("· \(TextSanitizer.clean(postID)) now has \(count)")
            case .postDeleted:
                output.notice("· \(TextSanitizer.clean(postID)) was deleted")
            case .userCreated, .userDeleted:
                break
            }
        }
        let input = LineInputSource(listener: adapter)
        await withDependencies {
            $0.feedClient = .live(service)
        } operation: {
            let session = AppSession(viewerID: viewer, pageSize: command.limit, output: output)
            await session.run(adapter.actions)
        }
        live.stop()
        notices.cancel()
        withExtendedLifetime(input) {}
        if let failure = live.failure { throw failure }
        return .success
    }
}
