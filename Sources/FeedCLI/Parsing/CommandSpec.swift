/// The metadata of one command: what help shows and what the parser accepts.
struct CommandSpec: Sendable, Hashable {
    /// The words that name it: `["feed"]`, `["user", "add"]`.
    let path: [String]
    /// One sentence for the command list and the top of its help.
    let summary: String
    /// Its positional arguments, in order (all required).
    let arguments: [ArgumentSpec]
    /// Its own options (the global ones are accepted everywhere).
    let options: [OptionSpec]
    /// Whether it acts as a viewer and so needs `--user` or `FEEDSYNC_USER`.
    let needsUser: Bool
    /// Extra lines of help after the options, such as limits and defaults.
    let notes: [String]
    /// How it opens the database.
    let database: DatabaseUse

    /// `user add`.
    var name: String { path.joined(separator: " ") }

    /// Whether it needs a user that, on a replica, defaults to the replica's user (every command that needs one but
    /// `replica init`, which names the user a new replica acts as, and `token issue`, which names the token's user).
    var actsAsReplicaUser: Bool { needsUser && path != ["replica", "init"] && path != ["token", "issue"] }

    /// `feedsync feed [--limit N] [--before CURSOR]`.
    var usage: String {
        var parts = ["feedsync", name]
        parts += options.map { "[\($0.synopsis)]" }
        parts += arguments.map(\.name)
        return parts.joined(separator: " ")
    }

    /// The option called `name`, if this command has it.
    func option(named name: String) -> OptionSpec? {
        options.first { $0.name == name }
    }
}

/// How a command opens the database (`Docs/CLI.md`, "Which commands create or migrate the database").
enum DatabaseUse: Sendable, Hashable {
    /// Creates a missing file, then validates, switches to WAL and migrates: `init`, `seed`, `demo`, `check`.
    case creates
    /// Refuses a missing file; validates, switches to WAL and migrates: the commands that write.
    case writes
    /// Refuses a missing file; opens read-only, writing nothing (no migration, no journal-mode change). The schema
    /// must be current.
    case reads
    /// Like ``reads``, at whatever schema version the database has: `status`, which reports it.
    case inspects
    /// Never opens it: `completions`.
    case none
}
