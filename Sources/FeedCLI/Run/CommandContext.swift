internal import FeedSync
internal import Foundation

/// Everything a running command needs: settings, the console, styling and how to open the database.
struct CommandContext: Sendable {
    /// The resolved options.
    let settings: Settings
    /// Where output goes.
    let console: Console
    /// The process environment.
    let environment: [String: String]
    /// Which streams are terminals.
    let terminal: TerminalInfo

    /// Styling for stdout.
    var style: Style { Style(enabled: settings.color) }

    /// How the running command opens the database (from its ``CommandSpec``).
    let databaseUse: DatabaseUse
    /// The running command's name (`like`, `post add`), for messages.
    let commandName: String

    /// Opens the database as ``openService(create:follows:)`` does, for a command that acts as a user, and resolves
    /// that user with ``actingUser(on:required:)``.
    ///
    /// A `required` user that is missing is the error (64), as on any command line that lacks one, unless the
    /// database is a replica — found out without writing anything (``isReplica()``).
    func openService(follows: Bool = false, actingUser required: Bool) throws(CLIError) -> (FeedService, String?) {
        if required, settings.userID == nil, !isReplica() { throw CLIError(ParserError.missingUser(command: commandName)) }
        let service = try openService(create: false, follows: follows)
        do {
            return (service, try actingUser(on: service, required: required))
        } catch {
            service.close()
            throw error
        }
    }

    /// Whether the database is a replica, read without migrating or writing anything; `false` when it cannot be
    /// read (the command's own open then reports why).
    func isReplica() -> Bool { replicaSource() != nil }

    /// Where the database replicates from when it is a replica (read without writing anything, as ``isReplica()``).
    func replicaSource() -> String? {
        guard let backend = try? openBackend(mode: .inspect) else { return nil }
        guard let service = try? FeedService(backend: backend) else {
            backend.close()
            return nil
        }
        defer { service.close() }
        return service.replicaLink?.source
    }

    /// The user a command acts as on `service`: on a replica, the replica's user — the default, and the only one
    /// allowed (another is a usage error, 64) —; elsewhere `--user` or `FEEDSYNC_USER`, which a `required` user
    /// must be.
    func actingUser(on service: FeedService, required: Bool) throws(CLIError) -> String? {
        try replicaDefault(on: service, given: settings.userID, origin: settings.userOrigin) {
            required ? ParserError.missingUser(command: commandName) : nil
        }
    }

    /// `given` (from `origin`, such as `--author`) checked against the replica's user: `given`, or the replica's user
    /// when absent; a `given` other than the replica's user is a usage error. Off a replica, `given`, or the error
    /// `missing` returns (when it returns one) when `given` is absent.
    func replicaDefault(
        on service: FeedService, given: String?, origin: String, missing: () -> ParserError?
    ) throws(CLIError) -> String? {
        guard let replicaUser = service.replicaLink?.userID else {
            if given == nil, let error = missing() { throw CLIError(error) }
            return given
        }
        guard let given else { return replicaUser }
        guard given == replicaUser else {
            let fix = origin == "FEEDSYNC_USER" ? "unset FEEDSYNC_USER or set it to" : "leave \(origin) out or pass \(origin)"
            throw CLIError(
                "\(origin) \(FeedError.quoted(given)) is not this replica's user: \(FeedError.quoted(settings.databaseDisplay)) "
                    + "acts only as \(FeedError.quoted(replicaUser)); \(fix) \(replicaUser). See 'feedsync \(commandName) --help'.",
                exitCode: .usage)
        }
        return given
    }

    /// Opens the database as a service: read-only for a command that ``DatabaseUse/reads`` (nothing is migrated or
    /// written, and the schema must be current), else read-write and migrated.
    ///
    /// Every way of opening checks the schema version before anything writes to the file, so a database newer
    /// than this binary is refused unchanged (even its journal mode).
    ///
    /// - Parameters:
    ///   - create: create (and migrate) a missing file; otherwise a missing file is an error that points to
    ///     `feedsync init`.
    ///   - follows: the command goes on reading later commits (`events --follow`, `watch`); see
    ///     ``openBackend(mode:follows:)``.
    func openService(create: Bool, follows: Bool = false) throws(CLIError) -> FeedService {
        if !create, databaseUse == .reads || databaseUse == .inspects {
            return try openReadOnlyService(follows: follows)
        }
        if case .sqliteFile(let path) = settings.location {
            if !create { try requireDatabaseFile() }
            if create {
                do {
                    try FeedPaths.createParentDirectory(of: path)
                } catch {
                    throw CLIError(
                        "cannot create the directory of \(FeedError.quoted(path)). Check its permissions, or pass --db.",
                        exitCode: .database)
                }
            }
        }
        do {
            return try FeedService(location: settings.location, options: openOptions, logger: logger)
        } catch {
            throw CLIError(error)
        }
    }

    /// Opens the database for `check`, which reads: as ``openService(create:follows:)`` with `create`, except that
    /// an existing SQLite file this process cannot write — permissions, a read-only directory or file system, a full
    /// disk — is opened read-only, as the commands that only read open it, instead of failing.
    func openServiceForCheck() throws(CLIError) -> FeedService {
        guard case .sqliteFile(let path) = settings.location, FileManager.default.fileExists(atPath: path) else {
            return try openService(create: true)
        }
        do {
            return try FeedService(location: settings.location, options: openOptions, logger: logger)
        } catch .storage(.readOnly), .storage(.diskFull), .storage(.ioError) {
            return try openReadOnlyService(follows: false)
        } catch {
            throw CLIError(error)
        }
    }

    /// Opens the existing database read-only (``FeedOpenOptions/Mode/readCurrent``) as a service.
    private func openReadOnlyService(follows: Bool) throws(CLIError) -> FeedService {
        let backend = try openBackend(mode: .readCurrent, follows: follows)
        do {
            return try FeedService(backend: backend, configuration: FeedService.Configuration(logger: logger))
        } catch {
            backend.close()
            throw CLIError(error)
        }
    }

    /// Opens the existing database read-only, writing nothing: ``FeedOpenOptions/Mode/readCurrent`` (the schema
    /// must be current) or ``FeedOpenOptions/Mode/inspect`` (any version up to this binary's).
    ///
    /// A SQLite file with no write-ahead log to read that this process cannot write (or whose directory it cannot),
    /// or that has no room for its `-shm` file on a full disk, is read as immutable, creating no file; not when the
    /// command `follows` later commits, which an immutable reader never sees
    /// (``FeedOpenOptions/immutableWhenUnwritable``).
    func openBackend(mode: FeedOpenOptions.Mode, follows: Bool = false) throws(CLIError) -> any FeedBackend {
        if case .sqliteFile = settings.location { try requireDatabaseFile() }
        var options = openOptions
        options.mode = mode
        // Reading a WAL database creates its -wal and -shm files; let closing remove them again.
        options.removesWALFilesOnClose = true
        options.immutableWhenUnwritable = !follows
        // A read that ends soon reads a few dozen pages once: `pread` costs less than mapping the file.
        options.memoryMap = follows
        do {
            return try FeedBackends.open(settings.location, options: options)
        } catch .storage(.migrationsPending(let databaseVersion, let binaryVersion)) {
            throw CLIError(
                "the database \(FeedError.quoted(settings.databaseDisplay)) has schema version \(databaseVersion) and this "
                    + "feedsync reads version \(binaryVersion); reading never migrates. Run 'feedsync init' to migrate it.",
                exitCode: .database)
        } catch {
            throw CLIError(error)
        }
    }

    /// Refuses a missing database file, pointing to `feedsync init`.
    private func requireDatabaseFile() throws(CLIError) {
        let path = settings.databasePath
        guard FileManager.default.fileExists(atPath: path) else {
            throw CLIError(
                "no database at \(FeedError.quoted(path)). Run 'feedsync init' to create it, or pass --db.",
                exitCode: .database)
        }
    }

    /// The open options: the default 5 s busy timeout, or `FEEDSYNC_BUSY_TIMEOUT_MS`; the default 20 s PostgreSQL
    /// response timeout, or `FEEDSYNC_RESPONSE_TIMEOUT_MS` (0 waits as long as the connection lives).
    var openOptions: FeedOpenOptions {
        var options = FeedOpenOptions()
        if let busyTimeout = settings.busyTimeout { options.busyTimeout = busyTimeout }
        if let responseTimeout = settings.responseTimeout { options.responseTimeout = responseTimeout }
        return options
    }

    /// Prints the service's log events at ``Settings/logLevel`` or above on stderr, one line each
    /// (`feedsync: [warning] changeWatch.failed: …`); `nil` when `FEEDSYNC_LOG` is unset. Events carry no secret.
    var logger: FeedLogger? {
        guard let least = settings.logLevel else { return nil }
        let console = console
        return { event in
            if event.level >= least { console.error("feedsync: \(event)") }
        }
    }
}
