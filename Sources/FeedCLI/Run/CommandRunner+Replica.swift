internal import FeedJSON
internal import FeedSync
internal import Foundation

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

extension CommandRunner {
    /// `replica init --from LOCATION --user U`: makes the new or empty SQLite database a replica of LOCATION for U and
    /// syncs it once.
    ///
    /// The replica is built in a new file beside the database and renamed over it only once the first sync succeeded,
    /// so on any failure — the source unreachable, U unknown there — the database is left as it was (a file the
    /// command would have created does not appear).
    func replicaInit(_ command: ReplicaInitCommand) async throws(CLIError) -> ExitCode {
        guard case .sqliteFile(let path) = context.settings.location else {
            throw CLIError(
                "a replica is a SQLite file, not \(FeedError.quoted(context.settings.databaseDisplay)): pass --db PATH. "
                    + "See 'feedsync replica init --help'.", exitCode: .usage)
        }
        let token = command.token ?? ProcessEnvironment.current()["FEEDSYNC_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        let source = try Self.replicaSource(command.source, token: token, replica: path)
        let user = context.settings.userID ?? ""
        if FileManager.default.fileExists(atPath: path) { try refuseNonEmpty() }
        do {
            try FeedPaths.createParentDirectory(of: path)
        } catch {
            throw CLIError(
                "cannot create the directory of \(FeedError.quoted(path)). Check its permissions, or pass --db.", exitCode: .database)
        }
        let building = path + ".replica-init-" + String(UUID().uuidString.prefix(8)).lowercased()
        var built = false
        defer { if !built { Self.removeDatabaseFiles(building) } }
        let replica: FeedService
        do {
            replica = try FeedService(location: .sqliteFile(path: building), options: context.openOptions, logger: context.logger)
        } catch {
            throw CLIError(error)
        }
        let transport = SyncTransports.transport(for: source, userID: user, options: context.openOptions)
        let status: ReplicaStatus
        let posts: Int
        do {
            defer {
                (transport as? InProcessSyncTransport)?.close()
                replica.close()  // the last connection to close checkpoints the WAL and removes -wal and -shm
            }
            try attempt { () throws(FeedError) in
                try replica.makeReplica(of: source, userID: user, clientID: UUID().uuidString.lowercased())
            }
            do {
                _ = try await ReplicaSync(replica: replica, transport: transport).sync()
            } catch .unavailable(let reason) {
                throw CLIError(
                    "the source is unavailable: \(reason); \(FeedError.quoted(path)) was left as it was. Check --from and "
                        + "that the source is up, then try again.", exitCode: .busy)
            } catch .accountNotFound {
                throw CLIError(
                    "the source has no account \(FeedError.quoted(user)) (it was never created, or was erased); "
                        + "\(FeedError.quoted(path)) was left as it was. Create the user there, or pass another --user.",
                    exitCode: .data)
            } catch .unauthorized {
                throw CLIError(
                    "the server refused the token (missing, wrong or revoked); \(FeedError.quoted(path)) was left as it was. "
                        + "Issue one with 'feedsync token issue --user \(user)' on the server.", exitCode: .data)
            } catch {
                throw CLIError(error)
            }
            guard let made = try attempt({ () throws(FeedError) in try replica.replicaStatus() }) else {
                throw CLIError(SyncError.notAReplica)
            }
            status = made
            posts = try attempt { () throws(FeedError) in try replica.status().posts }
        }
        // Stale -wal and -shm files of the empty database replaced would be read as the new file's.
        Self.removeDatabaseFiles(path, keepingMain: true)
        guard rename(building, path) == 0 else {
            let reason = String(cString: strerror(errno))
            throw CLIError(
                "cannot create \(FeedError.quoted(path)): \(reason). Check its directory's permissions, or pass --db.", exitCode: .database)
        }
        built = true
        let shown = context.settings.databaseDisplay
        if json {
            printJSON(JSONShapes.replicaInit(path: shown, status: status, posts: posts))
        } else {
            let counted = posts == 1 ? "1 post" : "\(posts) posts"
            console.line(
                "\(TextSanitizer.clean(shown)) is a replica of \(TextSanitizer.clean(status.replicaOf)) for "
                    + "\(TextSanitizer.clean(status.user)) (\(counted))")
        }
        return .success
    }

    /// `sync`: pushes the replica's queue, then pulls until it reflects the source; `--follow` keeps doing so.
    func sync(_ command: SyncCommand) async throws(CLIError) -> ExitCode {
        let service = try context.openService(create: false, follows: command.follow)
        defer { service.close() }  // on SQLite the last connection to close checkpoints the WAL
        guard let link = service.replicaLink else { throw CLIError(SyncError.notAReplica) }
        let transport = SyncTransports.transport(for: link.source, userID: link.userID, options: context.openOptions)
        defer { (transport as? InProcessSyncTransport)?.close() }
        let sync: ReplicaSync
        do {
            sync = try ReplicaSync(replica: service, transport: transport)
        } catch {
            throw CLIError(error)
        }
        if command.follow { return try await follow(sync) }
        let report: ReplicaSync.Report
        do {
            report = try await sync.sync()
        } catch {
            throw Self.hidingPassword(CLIError(error), of: link.source)
        }
        printReport(report)
        return .success
    }

    /// `sync --follow`: syncs until SIGINT or SIGTERM (status 0) or a permanent failure; an unreachable source is
    /// retried meanwhile. Text prints a line per sync that moved something; JSON a line per sync.
    private func follow(_ sync: ReplicaSync) async throws(CLIError) -> ExitCode {
        let stop = StopSignal()
        let runner = self
        let task = Task { () -> SyncError? in
            do throws(SyncError) {
                try await sync.follow { report in
                    if runner.json || report.pushed + report.pulled + report.rejected > 0 { runner.printReport(report) }
                }
                return nil
            } catch {
                stop.fire()
                return error
            }
        }
        await stop.wait()
        task.cancel()
        if let error = await task.value {
            throw Self.hidingPassword(CLIError(error), of: sync.replica.replicaLink?.source ?? "")
        }
        return .success
    }

    /// One sync's line: JSON, or text with a hint on stderr when the source refused changes.
    private func printReport(_ report: ReplicaSync.Report) {
        if json {
            printJSON(JSONShapes.syncReport(report))
            return
        }
        console.line(TextShapes.syncReport(report))
        if report.rejected > 0 {
            console.error("The source refused \(report.rejected == 1 ? "1 change" : "\(report.rejected) changes"); see 'feedsync status'.")
        }
    }

    /// Refuses an existing database that is a replica or holds anything (65), before anything is written to it.
    private func refuseNonEmpty() throws(CLIError) {
        let service = try context.openService(create: false)
        defer { service.close() }
        let shown = FeedError.quoted(context.settings.databaseDisplay)
        if let link = service.replicaLink {
            throw CLIError(
                "\(shown) is a replica already (of \(FeedError.quoted(FeedLocation.redacted(link.source))) for "
                    + "\(FeedError.quoted(link.userID))). Pass --db with a new file.", exitCode: .data)
        }
        let status = try attempt { () throws(FeedError) in try service.status() }
        guard status.users == 0, status.posts == 0, status.events == 0 else {
            throw CLIError(
                "\(shown) has data (\(status.users) users, \(status.posts) posts, \(status.events) events); a replica starts "
                    + "from a new or empty database. Pass --db with a new file.", exitCode: .data)
        }
    }

    /// The source to store: a `postgresql://` URL as given, a file's absolute path (so that `sync` finds it from
    /// any working directory), or an `http(s)://` URL with the token as its password (shown redacted, like a
    /// PostgreSQL password). The replica itself is a usage error.
    private static func replicaSource(_ text: String, token: String?, replica: String) throws(CLIError) -> String {
        let lowered = text.lowercased()
        if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
            guard var components = URLComponents(string: text), components.host?.isEmpty == false else {
                throw CLIError(
                    "--from \(FeedError.quoted(FeedLocation.redacted(text))) is not a URL: pass http://HOST:PORT of a "
                        + "feedsync serve. See 'feedsync replica init --help'.", exitCode: .usage)
            }
            guard let token, !token.isEmpty else {
                throw CLIError(
                    "--from \(FeedError.quoted(FeedLocation.redacted(text))) needs the user's token: pass --token or set "
                        + "FEEDSYNC_TOKEN. See 'feedsync replica init --help'.", exitCode: .usage)
            }
            components.user = "token"
            components.password = token
            return components.string ?? text
        }
        let location: FeedLocation
        do {
            location = try FeedLocation(text)
        } catch {
            throw CLIError(
                "--from \(FeedError.quoted(FeedLocation.redacted(text))) is not a database FeedSync can open: pass a SQLite "
                    + "file or a postgresql:// URL. See 'feedsync replica init --help'.", exitCode: .usage)
        }
        switch location {
        case .postgreSQL(let url):
            return url
        case .sqliteInMemory:
            throw CLIError(
                "--from \":memory:\" is an empty in-memory database: pass a SQLite file or a postgresql:// URL. "
                    + "See 'feedsync replica init --help'.", exitCode: .usage)
        case .sqliteFile(let path):
            let absolute = absolutePath(path)
            guard absolute != absolutePath(replica) else {
                throw CLIError(
                    "--from and --db name the same file: a database cannot be a replica of itself. "
                        + "See 'feedsync replica init --help'.", exitCode: .usage)
            }
            return absolute
        }
    }

    private static func absolutePath(_ path: String) -> String {
        let url =
            path.hasPrefix("/")
            ? URL(fileURLWithPath: path) : URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(path)
        return url.standardizedFileURL.path
    }

    /// Removes a SQLite database's files: `-wal`, `-shm`, `-journal`, and the file itself unless `keepingMain`.
    private static func removeDatabaseFiles(_ path: String, keepingMain: Bool = false) {
        for suffix in (keepingMain ? [] : [""]) + ["-wal", "-shm", "-journal"] {
            unlink(path + suffix)
        }
    }

    /// `error` with the source's full location (which may carry a password) replaced by its redacted form.
    private static func hidingPassword(_ error: CLIError, of source: String) -> CLIError {
        let redacted = FeedLocation.redacted(source)
        guard redacted != source, error.message.contains(source) else { return error }
        return CLIError(
            String(error.message.dropFirst("Error: ".count)).replacingOccurrences(of: source, with: redacted), exitCode: error.exitCode)
    }
}
