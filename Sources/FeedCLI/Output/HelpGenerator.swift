/// Builds help text from ``CommandCatalog`` metadata (STYLE §12: help is generated, never hand-kept).
enum HelpGenerator {
    /// Help for `topic`: `[]` for the tool, `["user"]` for a group, a command's path for a command.
    static func help(for topic: [String]) -> String {
        if let command = CommandCatalog.command(topic) { return help(command) }
        if let group = topic.first, let commands = CommandCatalog.groups[group] {
            return lines(
                [
                    "Usage: feedsync \(group) <command> [options]", "",
                    "Commands:",
                ] + table(commands.map { ($0.name, $0.summary) }) + ["", "See 'feedsync \(group) <command> --help' for details."])
        }
        return overview()
    }

    private static func overview() -> String {
        lines(
            [
                "feedsync — a feed with likes on a SQLite file or a PostgreSQL database, synced across processes and machines.", "",
                "Usage: feedsync <command> [options]", "",
                "Commands:",
            ] + table(CommandCatalog.commands.map { ($0.name, $0.summary) })
                + ["", "Global options (anywhere on the line):"] + optionLines(CommandCatalog.globalOptions)
                + [
                    "", "Environment: FEEDSYNC_DB, FEEDSYNC_USER, NO_COLOR, XDG_DATA_HOME, FEEDSYNC_BUSY_TIMEOUT_MS,",
                    "FEEDSYNC_RESPONSE_TIMEOUT_MS, FEEDSYNC_LOG (debug, info, warning or error: log lines on stderr).",
                    "Exit status: 0 ok, 1 check found violations, 64 usage, 65 data, 66 history pruned, 74 database or I/O, 75 busy or unreachable.",
                    "", "Start with 'feedsync demo'. See 'feedsync <command> --help' for details.",
                ])
    }

    private static func help(_ command: CommandSpec) -> String {
        var text = [command.summary, "", "Usage: " + command.usage]
        if !command.arguments.isEmpty {
            text += ["", "Arguments:"] + table(command.arguments.map { ($0.name, $0.help) })
        }
        if !command.options.isEmpty {
            text += ["", "Options:"] + optionLines(command.options)
        }
        if command.needsUser {
            text += ["", "Acts as --user ID (or $FEEDSYNC_USER), which is required."]
            if command.actsAsReplicaUser { text += ["On a replica it defaults to the replica's user, the only one allowed."] }
        }
        if !command.notes.isEmpty {
            text += [""] + command.notes
        }
        text += ["", "Global options: --db PATH, --user ID, --json, --no-color, -h/--help, --version (see 'feedsync --help')."]
        return lines(text)
    }

    private static func optionLines(_ options: [OptionSpec]) -> [String] {
        table(options.map { ($0.synopsis, $0.help) })
    }

    private static func table(_ rows: [(String, String)]) -> [String] {
        let width = rows.map { $0.0.count }.max() ?? 0
        return rows.map { "  " + $0.0 + String(repeating: " ", count: width - $0.0.count + 2) + $0.1 }
    }

    private static func lines(_ lines: [String]) -> String {
        lines.joined(separator: "\n") + "\n"
    }
}
