internal import FeedSync

/// Everything that can be wrong with a command line; each renders as one line naming the value and the fix.
enum ParserError: Error, Sendable, Hashable {
    /// No command word.
    case noCommand
    /// The first word is not a command; `suggestion` is a close one.
    case unknownCommand(String, suggestion: String?)
    /// `user frobnicate`.
    case unknownSubcommand(group: String, String)
    /// `user` alone.
    case missingSubcommand(group: String)
    /// `--bogus` or `-x` on a command that does not have it.
    case unknownOption(String, command: String)
    /// `--limit` at the end of the line.
    case missingValue(option: String, command: String)
    /// `--json=yes`.
    case flagWithValue(option: String, value: String, command: String)
    /// `--limit 5 --limit 6`.
    case duplicateOption(option: String, command: String)
    /// A word the command does not take.
    case unexpectedArgument(String, command: String)
    /// A required positional argument is missing.
    case missingArgument(name: String, command: String)
    /// `--limit abc`, `--limit 0`, `--limit 5000`.
    case invalidNumber(option: String, value: String, range: ClosedRange<Int64>, command: String)
    /// `--before nonsense`.
    case invalidCursor(String, command: String)
    /// `--db ""`.
    case emptyValue(option: String, command: String)
    /// `seed --likes` larger than half of posts × users.
    case tooManyLikes(likes: Int, maximum: Int)
    /// A viewer command without `--user` or `FEEDSYNC_USER`.
    case missingUser(command: String)
    /// `--author` missing on `post add`.
    case missingOption(option: String, command: String)
    /// `--db :memory:`, `--db file:x.sqlite?mode=ro` or the same in `FEEDSYNC_DB` (`origin`): not a file path.
    case notADatabasePath(String, origin: String)
    /// `--db mysql://…`: a URL of a scheme no backend serves (the value is already redacted).
    case unsupportedDatabaseURL(String, origin: String)
    /// `completions tcsh`.
    case unknownShell(String)
    /// `serve --listen nonsense`: not `HOST:PORT` with a literal IP address and a port.
    case invalidListen(String)
    /// `serve --demo --listen 0.0.0.0:8080`: demo mode offers the sample users' tokens, so it stays on loopback.
    case demoNeedsLoopback(String)
    /// `FEEDSYNC_RESPONSE_TIMEOUT_MS=soon`: an environment variable the CLI reads holds a value it cannot use.
    case invalidEnvironment(name: String, value: String, expected: String)

    /// The command whose help the hint points to (`nil` for the top-level help).
    var helpCommand: String? {
        switch self {
        case .noCommand, .unknownCommand, .notADatabasePath, .unsupportedDatabaseURL, .invalidEnvironment: nil
        case .unknownSubcommand(let group, _), .missingSubcommand(let group): group
        case .unknownOption(_, let command), .missingValue(_, let command), .flagWithValue(_, _, let command),
            .duplicateOption(_, let command), .unexpectedArgument(_, let command), .missingArgument(_, let command),
            .invalidNumber(_, _, _, let command), .invalidCursor(_, let command), .emptyValue(_, let command),
            .missingUser(let command), .missingOption(_, let command):
            command
        case .tooManyLikes: "seed"
        case .unknownShell: "completions"
        case .invalidListen, .demoNeedsLoopback: "serve"
        }
    }

    /// What was wrong, without the `Error: ` prefix and the hint.
    var problem: String {
        switch self {
        case .noCommand: "no command given"
        case .unknownCommand(let word, let suggestion):
            "unknown command \(FeedError.quoted(word))" + (suggestion.map { " (did you mean '\($0)'?)" } ?? "")
        case .unknownSubcommand(let group, let word):
            "unknown command \(FeedError.quoted(group + " " + word)): use " + Self.subcommandList(group)
        case .missingSubcommand(let group): "'\(group)' needs a subcommand: " + Self.subcommandList(group)
        case .unknownOption(let option, let command): "unknown option \(FeedError.quoted(option)) for '\(command)'"
        case .missingValue(let option, _): "option --\(option) needs a value"
        case .flagWithValue(let option, let value, _): "option --\(option) takes no value (got \(FeedError.quoted(value)))"
        case .duplicateOption(let option, _): "option --\(option) is given more than once"
        case .unexpectedArgument(let word, let command):
            "unexpected argument \(FeedError.quoted(word)) for '\(command)'" + (command == "post add" ? " (quote the text)" : "")
        case .missingArgument(let name, let command): "'\(command)' needs \(name)"
        case .invalidNumber(let option, let value, let range, _):
            "invalid value \(FeedError.quoted(value)) for --\(option): use a whole number from \(range.lowerBound) to \(range.upperBound)"
        case .invalidCursor(let value, _):
            "invalid cursor \(FeedError.quoted(value)) for --before: use the nextCursor of a page from 'feedsync feed'"
        case .emptyValue(let option, _): "option --\(option) needs a non-empty value"
        case .tooManyLikes(let likes, let maximum):
            "--likes \(likes) is more than half of --posts × --users (\(maximum)): lower --likes or raise the others"
        case .missingUser(let command): "'\(command)' acts as a user: pass --user ID or set FEEDSYNC_USER"
        case .missingOption(let option, let command): "'\(command)' needs --\(option)"
        case .unknownShell(let value):
            "unknown shell \(FeedError.quoted(value)) for 'completions': use " + CompletionShell.names.joined(separator: ", ")
        case .invalidListen(let value):
            "invalid value \(FeedError.quoted(value)) for --listen: use HOST:PORT with an IP address, such as 127.0.0.1:8080 "
                + "or [::1]:8080 (port 0 picks a free one)"
        case .demoNeedsLoopback(let value):
            "--demo serves the sample users' tokens, so it listens only on a loopback address, not \(FeedError.quoted(value)): "
                + "use 127.0.0.1 or [::1], or leave --demo out"
        case .invalidEnvironment(let name, let value, let expected):
            "\(name) \(FeedError.quoted(value)) is not valid: \(expected) (or unset it)"
        case .unsupportedDatabaseURL(let value, let origin):
            "\(origin) \(FeedError.quoted(value)) is a URL FeedSync cannot open: pass a file path (SQLite) or a "
                + "postgresql:// URL"
        case .notADatabasePath(let value, let origin):
            value == ":memory:"
                ? "\(origin) \(FeedError.quoted(value)) is SQLite's in-memory database, which would vanish when the command "
                    + "ends: pass a database file path such as ./feed.sqlite"
                : "\(origin) \(FeedError.quoted(value)) is a SQLite URI, not a file path: pass the file's plain path "
                    + "(with ./ before a name that starts with 'file:')"
        }
    }

    /// The whole line: `Error: <problem>. See 'feedsync <command> --help'.`
    var message: String {
        "Error: \(problem). See 'feedsync \(helpCommand.map { $0 + " " } ?? "")--help'."
    }

    private static func subcommandList(_ group: String) -> String {
        (CommandCatalog.groups[group] ?? []).map { "'\($0.name)'" }.joined(separator: " or ")
    }
}
