internal import FeedSync

#if HTTP
    internal import FeedServer

    extension CommandRunner {
        /// `serve [--listen HOST:PORT] [--demo]`: serves the database over HTTP until SIGINT or SIGTERM (exit 0).
        ///
        /// The service's ``FeedService/run()`` keeps going meanwhile, so other processes' and machines' commits reach
        /// the event streams. On a signal the server stops (streams end, requests in flight finish), then the watch
        /// and the database close.
        /// The label of the tokens `serve --demo` issues; a later `serve --demo` revokes the earlier run's.
        static let demoTokenLabel = "serve --demo"

        /// A fresh token for each user of the demo database, the previous demo run's revoked.
        private func demoUsers(_ service: FeedService) throws(CLIError) -> [ServerConfiguration.DemoUser] {
            try attempt { () throws(FeedError) in
                for token in try service.tokens() where token.label == Self.demoTokenLabel && token.revokedAt == nil {
                    _ = try service.revokeToken(id: token.id)
                }
                return try service.users().map { user throws(FeedError) in
                    let issued = try service.issueToken(userID: user.id, label: Self.demoTokenLabel)
                    return ServerConfiguration.DemoUser(user: user.id, name: user.name, token: issued.token)
                }
            }
        }

        func serve(_ command: ServeCommand) async throws(CLIError) -> ExitCode {
            // First, so that a signal from now on ends the run through the normal path.
            let stop = StopSignal()
            let service = try context.openService(create: command.demo)
            defer { service.close() }
            if command.demo {
                let status = try attempt { () throws(FeedError) in try service.status() }
                if status.posts == 0 { try installSampleData(service) }
            }
            var configuration = ServerConfiguration()
            configuration.host = command.host
            configuration.port = command.port
            configuration.demo = command.demo
            configuration.maximumStreams = command.maximumStreams
            configuration.maximumConnectionsPerAddress = command.maximumConnectionsPerAddress
            configuration.workers = command.workers
            configuration.publicMetrics = command.publicMetrics
            if command.demo { configuration.demoUsers = try demoUsers(service) }
            let server: HTTPServer
            do {
                server = try HTTPServer(
                    service: service, configuration: configuration,
                    authenticator: { token throws(FeedError) in try service.authenticate(token: token) })
            } catch {
                if case .database(let failure) = error { throw CLIError(failure) }
                throw CLIError("\(error). Pass another --listen, or stop the program using it.", exitCode: .database)
            }
            let location = TextSanitizer.clean(context.settings.databaseDisplay)
            console.line("feedsync: serving \(location) on \(command.url(port: server.port)) (Ctrl-C to stop)")
            let watch = Task { () -> FeedError? in
                do throws(FeedError) {
                    try await service.run()
                    return nil
                } catch {
                    stop.fire()  // the watch ended by itself (the database file was replaced): stop serving
                    return error
                }
            }
            await stop.wait()
            server.stop()
            watch.cancel()
            if let failure = await watch.value { throw CLIError(failure) }
            return .success
        }
    }
#else
    extension CommandRunner {
        /// `serve` in a build without the HTTP trait: refused in one line (74). The `feedsync` executable hands the
        /// command to `feedsync-postgres` beside it first, when there is one (``PostgresHandOff``).
        func serve(_ command: ServeCommand) async throws(CLIError) -> ExitCode {
            throw CLIError(PostgresHandOff.noHTTP + ". Install the default build (swift build -c release) to serve.", exitCode: .database)
        }
    }
#endif
