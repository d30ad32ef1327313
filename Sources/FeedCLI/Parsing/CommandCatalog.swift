/// Every command's metadata: the single source for the parser and the help text.
enum CommandCatalog {
    /// The options accepted by every command.
    static let globalOptions: [OptionSpec] = [
        OptionSpec(
            name: "db", valueName: "PATH",
            help: "The database: a SQLite file or a PostgreSQL URL (default: $FEEDSYNC_DB, else the per-user data directory).",
            completion: .file),
        OptionSpec(name: "user", valueName: "ID", help: "The acting user (default: $FEEDSYNC_USER)."),
        OptionSpec(name: "json", valueName: nil, help: "Print JSON instead of text."),
        OptionSpec(name: "no-color", valueName: nil, help: "No colour (also when NO_COLOR is set or stdout is not a terminal)."),
        OptionSpec(name: "help", valueName: nil, help: "Show help (-h)."),
        OptionSpec(name: "version", valueName: nil, help: "Show the version."),
    ]

    private static let limit = OptionSpec(
        name: "limit", valueName: "N",
        help: "Posts per page, \(Limits.feedPage.lowerBound) to \(Limits.feedPage.upperBound) (default \(Limits.defaultFeedPage)).")

    /// Every command, in the order help lists them.
    static let commands: [CommandSpec] = [
        CommandSpec(
            path: ["init"], summary: "Create or migrate the database; prints its path and schema version.",
            arguments: [], options: [], needsUser: false, notes: ["Running it again changes nothing."],
            database: .creates),
        CommandSpec(
            path: ["status"], summary: "Show the database's path, schema version, pending migrations, counts and last seq.",
            arguments: [], options: [], needsUser: false, notes: [],
            database: .inspects),
        CommandSpec(
            path: ["user", "add"], summary: "Create a user.",
            arguments: [ArgumentSpec(name: "ID", help: "1 to 64 letters, digits or _ . : @ -")],
            options: [OptionSpec(name: "name", valueName: "NAME", help: "A display name (up to 200 characters).")],
            needsUser: false, notes: [],
            database: .writes),
        CommandSpec(
            path: ["user", "list"], summary: "List the users, ordered by id.",
            arguments: [], options: [], needsUser: false, notes: [],
            database: .reads),
        CommandSpec(
            path: ["user", "delete"],
            summary: "Erase a user: their posts, likes, tokens and replicas' sync records; the log no longer names them.",
            arguments: [ArgumentSpec(name: "ID", help: "The user's id.")], options: [], needsUser: false,
            notes: ["Erasing an unknown user changes nothing (an erased id leaves no trace)."],
            database: .writes),
        CommandSpec(
            path: ["post", "add"], summary: "Create a post; prints its id.",
            arguments: [ArgumentSpec(name: "TEXT", help: "The post's text (quote it; 1 to 10,000 characters).")],
            options: [
                OptionSpec(
                    name: "author", valueName: "ID",
                    help: "The author, an existing user (required, except on a replica: its user, the only author allowed)."),
                OptionSpec(name: "id", valueName: "POSTID", help: "The new post's id (default: generated)."),
            ],
            needsUser: false, notes: ["Use -- before a text that starts with a dash."],
            database: .writes),
        CommandSpec(
            path: ["post", "delete"], summary: "Delete a post with its likes, as the operator (any post).",
            arguments: [ArgumentSpec(name: "POST", help: "The post's id.")], options: [], needsUser: false,
            notes: [
                "Deleting a deleted post changes nothing; its id is never used again. Exit status 65 when no post had this id."
            ],
            database: .writes),
        CommandSpec(
            path: ["feed"], summary: "Show the feed, newest first, with ❤️ on the posts the viewer likes.",
            arguments: [],
            options: [limit, OptionSpec(name: "before", valueName: "CURSOR", help: "Continue after this cursor (a page's nextCursor).")],
            needsUser: false,
            notes: ["Without --user the feed is anonymous (nothing is marked liked); on a replica it is the replica's user's."],
            database: .reads),
        CommandSpec(
            path: ["show"], summary: "Show one post: text, author, time, likes, and whether the viewer likes it.",
            arguments: [ArgumentSpec(name: "POST", help: "The post's id.")], options: [], needsUser: false, notes: [],
            database: .reads),
        CommandSpec(
            path: ["like"], summary: "Like a post (liking a liked post changes nothing).",
            arguments: [ArgumentSpec(name: "POST", help: "The post's id.")], options: [], needsUser: true, notes: [],
            database: .writes),
        CommandSpec(
            path: ["unlike"], summary: "Take a like back (unliking an unliked post changes nothing).",
            arguments: [ArgumentSpec(name: "POST", help: "The post's id.")], options: [], needsUser: true, notes: [],
            database: .writes),
        CommandSpec(
            path: ["toggle"], summary: "Like the post if the user does not like it yet, else take the like back.",
            arguments: [ArgumentSpec(name: "POST", help: "The post's id.")], options: [], needsUser: true, notes: [],
            database: .writes),
        CommandSpec(
            path: ["events"], summary: "Print the event log, oldest first.",
            arguments: [],
            options: [
                OptionSpec(name: "since", valueName: "SEQ", help: "Only events after this seq (exclusive; default 0, the whole log)."),
                OptionSpec(
                    name: "limit", valueName: "N",
                    help: "At most N events, \(Limits.events.lowerBound) to \(Limits.events.upperBound) (default: all)."),
                OptionSpec(name: "follow", valueName: nil, help: "Keep printing new events from any process until interrupted."),
            ],
            needsUser: false,
            notes: [
                "Ctrl-C ends --follow with exit status 0.",
                "A --since whose following events were pruned from the log fails with exit status 66.",
            ],
            database: .reads),
        CommandSpec(
            path: ["watch"], summary: "Show the feed and keep it current while other processes change it.",
            arguments: [], options: [limit], needsUser: false, notes: ["Ctrl-C ends it with exit status 0."],
            database: .reads),
        CommandSpec(
            path: ["app"], summary: "The interactive feed → detail → like → back flow (reads commands from stdin).",
            arguments: [], options: [limit], needsUser: true,
            notes: ["Commands: feed, open POST, like, unlike, toggle, back, more, help, quit."],
            database: .writes),
        CommandSpec(
            path: ["seed"], summary: "Fill an empty database with deterministic sample data through the bulk path.",
            arguments: [],
            options: [
                OptionSpec(name: "posts", valueName: "N", help: "Posts post1…postN (default \(Limits.defaultSeed.posts))."),
                OptionSpec(name: "users", valueName: "N", help: "Likes are drawn from user1…userN (default \(Limits.defaultSeed.users))."),
                OptionSpec(name: "likes", valueName: "N", help: "Distinct likes (default \(Limits.defaultSeed.likes))."),
            ],
            needsUser: false,
            notes: ["Refuses a database that has posts. --likes may be at most half of posts × users."],
            database: .creates),
        CommandSpec(
            path: ["check"], summary: "Check integrity and invariants; exit status 1 lists each violation.",
            arguments: [], options: [], needsUser: false, notes: [],
            database: .creates),
        CommandSpec(
            path: ["replica", "init"],
            summary: "Make a new or empty SQLite database a replica of another database for one user, and sync it once.",
            arguments: [],
            options: [
                OptionSpec(
                    name: "from", valueName: "LOCATION",
                    help: "The source: a SQLite file, a postgresql:// URL, or a feedsync serve's http(s):// URL (required).",
                    completion: .file),
                OptionSpec(
                    name: "token", valueName: "TOKEN",
                    help: "The user's bearer token, for an http(s):// source (default: $FEEDSYNC_TOKEN)."),
            ],
            needsUser: true,
            notes: [
                "The replica acts only as the user given: its commands default to that user and refuse any other.",
                "--db must be a SQLite file that does not exist yet or holds no data; on any failure it is left as it was.",
                "An http(s):// source needs the user's token (feedsync token issue on the server); the replica keeps it to sync.",
                "Exit status: 64 a PostgreSQL --db, or an http(s):// source without a token; 65 a --db with data, a user "
                    + "the source does not have, or a token the server refuses; 75 the source unreachable.",
            ],
            database: .creates),
        CommandSpec(
            path: ["sync"], summary: "Sync a replica with its source: push its local changes, then pull the source's.",
            arguments: [],
            options: [OptionSpec(name: "follow", valueName: nil, help: "Keep syncing whenever either side changes, until interrupted.")],
            needsUser: false,
            notes: [
                "Prints one line per sync (with --follow: per sync that moved something; with --json: per sync).",
                "Ctrl-C ends --follow with exit status 0; with --follow an unreachable source is retried until it is back.",
                "Exit status: 64 not a replica, 65 the source refused the sync, 74 a database error, 75 the source "
                    + "unreachable (the local changes stay queued).",
            ],
            database: .writes),
        CommandSpec(
            path: ["token", "issue"], summary: "Issue an API token for a user (for 'feedsync serve'); prints it once.",
            arguments: [],
            options: [OptionSpec(name: "label", valueName: "TEXT", help: "A note for 'token list' (up to 200 characters).")],
            needsUser: true,
            notes: [
                "The token is printed once, alone on stdout; the database keeps only its SHA-256, so it cannot be shown again."
            ],
            database: .writes),
        CommandSpec(
            path: ["token", "list"], summary: "List the API tokens: id, user, label, creation and revocation (never the token).",
            arguments: [], options: [], needsUser: false, notes: [],
            database: .reads),
        CommandSpec(
            path: ["token", "revoke"], summary: "Revoke an API token: every server refuses it from its next request.",
            arguments: [ArgumentSpec(name: "ID", help: "The token's id (12 hex digits, as 'token list' shows).")],
            options: [], needsUser: false,
            notes: ["Revoking a revoked token changes nothing. Exit status 65 when no token has this id."],
            database: .writes),
        CommandSpec(
            path: ["serve"], summary: "Serve the database over HTTP: a JSON API, an event stream and a live page.",
            arguments: [],
            options: [
                OptionSpec(
                    name: "listen", valueName: "HOST:PORT",
                    help: "The address to listen on (default \(ServeCommand.defaultListen); [::1]:PORT for IPv6, port 0 for any free one)."),
                OptionSpec(
                    name: "demo", valueName: nil,
                    help: "Fill an empty database with the sample data and offer the sample users' tokens (loopback only)."),
                OptionSpec(
                    name: "max-streams", valueName: "N",
                    help: "Event streams open at once (default 10000); more get 503 with Retry-After."),
                OptionSpec(
                    name: "max-connections-per-ip", valueName: "N",
                    help: "Connections from one client address (default 500; 0 for none, behind a proxy that limits per client)."),
                OptionSpec(
                    name: "workers", valueName: "N",
                    help: "Threads for the requests that wait for the database (default 8, 1 to 256)."),
                OptionSpec(
                    name: "public-metrics", valueName: nil,
                    help: "Serve GET /metrics to every address, not only loopback."),
            ],
            needsUser: false,
            notes: [
                "Prints one line with the URL, then serves until Ctrl-C or SIGTERM (exit status 0).",
                "Requests act as the user of their Authorization: Bearer token. Listening on another address than loopback "
                    + "is explicit: put a TLS-terminating proxy in front (see Docs/HTTP.md).",
                "Exit status: 64 a malformed --listen, or --demo off loopback; 74 the address is in use or cannot be listened on.",
            ],
            database: .writes),
        CommandSpec(
            path: ["demo"], summary: "Play the feed → detail → like → back flow on sample data, with narration.",
            arguments: [], options: [], needsUser: false, notes: ["Creates the sample data when the database has no posts."],
            database: .creates),
        CommandSpec(
            path: ["completions"], summary: "Print the completion script for a shell (bash, zsh or fish) on stdout.",
            arguments: [ArgumentSpec(name: "SHELL", help: "bash, zsh or fish.", completion: .choices(CompletionShell.names))],
            options: [], needsUser: false,
            notes: [
                "bash: add 'source <(feedsync completions bash)' to ~/.bashrc.",
                "zsh:  feedsync completions zsh > ~/.zfunc/_feedsync, with ~/.zfunc on $fpath before compinit.",
                "fish: feedsync completions fish > ~/.config/fish/completions/feedsync.fish",
            ],
            database: .none),
    ]

    /// The names that have subcommands, with them.
    static let groups: [String: [CommandSpec]] = Dictionary(
        grouping: commands.filter { $0.path.count == 2 }, by: { $0.path[0] })

    /// The command named by `path`, if any.
    static func command(_ path: [String]) -> CommandSpec? {
        commands.first { $0.path == path }
    }

    /// Whether an option with this name takes a value, in any command (names mean the same everywhere).
    static func takesValue(_ name: String) -> Bool {
        valueOptionNames.contains(name)
    }

    private static let valueOptionNames: Set<String> = Set(
        (globalOptions + commands.flatMap(\.options)).filter { $0.valueName != nil }.map(\.name))

    /// Top-level names (`feed`, `user`, …) for suggestions.
    static let topLevelNames: [String] = {
        var seen: [String] = []
        for command in commands where !seen.contains(command.path[0]) { seen.append(command.path[0]) }
        return seen + ["help"]
    }()
}
