internal import FeedSync

/// The global options with the environment's defaults applied: where the database is, who acts, how to print.
struct Settings: Sendable, Hashable {
    /// The database: a SQLite file path or a `postgresql://` URL (which may hold a password: print
    /// ``databaseDisplay``, never this).
    let databasePath: String
    /// The parsed location.
    let location: FeedLocation
    /// The database fit to print: the path, or the URL without its password.
    var databaseDisplay: String { location.description }
    /// The acting user, if any.
    let userID: String?
    /// Where ``userID`` came from, for messages: `--user` or `FEEDSYNC_USER`.
    let userOrigin: String
    /// `--json`.
    let json: Bool
    /// Whether text output may use colour: stdout is a terminal, and neither `--no-color` nor `NO_COLOR` is set.
    let color: Bool
    /// Whether stdout is a terminal (control characters are always stripped from text output anyway).
    let stdoutIsTerminal: Bool
    /// Whether stderr is a terminal (progress bars).
    let stderrIsTerminal: Bool
    /// `FEEDSYNC_BUSY_TIMEOUT_MS`, when set.
    let busyTimeout: Duration?
    /// `FEEDSYNC_RESPONSE_TIMEOUT_MS`, when set: `.some(nil)` for 0, which waits as long as the connection lives.
    let responseTimeout: Duration??
    /// `FEEDSYNC_LOG`: the least level of the service's log events printed on stderr; `nil` prints none.
    let logLevel: FeedLogEvent.Level?

    /// Applies the environment to `global` for `spec`.
    ///
    /// - Parameter requiringUser: whether a missing user is an error here; `false` leaves the check to the command,
    ///   which on a replica acts as the replica's user.
    /// - Throws: ``ParserError/missingUser(command:)`` when `spec` needs a user and none is given,
    ///   ``ParserError/invalidEnvironment(name:value:expected:)`` when a variable holds a value the CLI cannot use.
    init(
        global: GlobalOptions, spec: CommandSpec, environment: [String: String], terminal: TerminalInfo, requiringUser: Bool = true
    ) throws(ParserError) {
        let path = global.databasePath ?? FeedPaths.defaultDatabasePath(environment: environment)
        // SQLite reads these as an in-memory database or a URI, not as the file the user means; refuse them before
        // anything is opened or created. (An empty --db is refused by the parser; an empty FEEDSYNC_DB is unset.)
        let fromEnvironment = !(environment["FEEDSYNC_DB"] ?? "").isEmpty
        let origin = global.databasePath != nil ? "--db" : fromEnvironment ? "FEEDSYNC_DB" : "the default database path"
        if path == ":memory:" || path.lowercased().hasPrefix("file:") {
            throw .notADatabasePath(path, origin: origin)
        }
        do {
            location = try FeedLocation(path)
        } catch {
            // Another scheme:// would otherwise be taken for a relative path ("mysql:" as a directory).
            throw .unsupportedDatabaseURL(FeedLocation.redacted(path), origin: origin)
        }
        databasePath = path
        let user = global.userID ?? environment["FEEDSYNC_USER"].flatMap { $0.isEmpty ? nil : $0 }
        if spec.needsUser, requiringUser, user == nil { throw .missingUser(command: spec.name) }
        userID = user
        userOrigin = global.userID != nil ? "--user" : "FEEDSYNC_USER"
        json = global.json
        // https://no-color.org: any non-empty NO_COLOR disables colour.
        let noColorEnv = !(environment["NO_COLOR"] ?? "").isEmpty
        color = terminal.stdoutIsTerminal && !global.noColor && !noColorEnv && environment["TERM"] != "dumb"
        stdoutIsTerminal = terminal.stdoutIsTerminal
        stderrIsTerminal = terminal.stderrIsTerminal
        busyTimeout = try Self.milliseconds("FEEDSYNC_BUSY_TIMEOUT_MS", in: environment)
        responseTimeout = try Self.milliseconds("FEEDSYNC_RESPONSE_TIMEOUT_MS", in: environment).map { $0 == .zero ? nil : $0 }
        logLevel = try Self.logLevel(in: environment)
    }

    /// A variable holding a whole number of milliseconds, 0 or more; `nil` when unset or empty.
    private static func milliseconds(_ name: String, in environment: [String: String]) throws(ParserError) -> Duration? {
        guard let text = environment[name], !text.isEmpty else { return nil }
        guard let millis = Int64(text), millis >= 0 else {
            throw .invalidEnvironment(name: name, value: text, expected: "use a whole number of milliseconds, 0 or more")
        }
        return .milliseconds(millis)
    }

    /// `FEEDSYNC_LOG`: `debug`, `info`, `warning` or `error`; `nil` when unset or empty.
    private static func logLevel(in environment: [String: String]) throws(ParserError) -> FeedLogEvent.Level? {
        guard let text = environment["FEEDSYNC_LOG"], !text.isEmpty else { return nil }
        let levels: [FeedLogEvent.Level] = [.debug, .info, .warning, .error]
        guard let level = levels.first(where: { $0.description == text.lowercased() }) else {
            throw .invalidEnvironment(name: "FEEDSYNC_LOG", value: text, expected: "use debug, info, warning or error")
        }
        return level
    }
}
