internal import FeedSync

/// Turns `argv` into an ``Invocation`` (STYLE §12 steps 1–4): tokenize, resolve the command, decode its options
/// and arguments into a typed command, validate ranges. Environment-dependent checks (the acting user) come later,
/// in ``Settings``.
enum CommandParser {
    /// An option occurrence after tokenizing, with its value attached.
    private struct OptionUse {
        let name: String
        let display: String
        let value: String?
        let index: Int
    }

    /// Parses the arguments after the program name.
    static func parse(_ arguments: [String]) throws(ParserError) -> Invocation {
        let tokens = Tokenizer.tokenize(arguments)
        var words: [String] = []
        var uses: [OptionUse] = []
        var wantsHelp = false
        var wantsVersion = false
        var pendingError: ParserError?
        var position = 0
        while position < tokens.count {
            let token = tokens[position]
            position += 1
            switch token.kind {
            case .terminator:
                continue
            case .value(let word):
                words.append(word)
            case .short(let letter):
                if letter == "h" {
                    wantsHelp = true
                } else {
                    uses.append(OptionUse(name: "-" + String(letter), display: "-" + String(letter), value: nil, index: token.index))
                }
            case .option(let name, let inlineValue):
                if name == "help" || name == "version" {
                    if name == "help" { wantsHelp = true } else { wantsVersion = true }
                    continue
                }
                var value = inlineValue
                if value == nil, CommandCatalog.takesValue(name) {
                    if position < tokens.count, case .value(let next) = tokens[position].kind, tokens[position].index == token.index + 1 {
                        value = next
                        position += 1
                    } else if pendingError == nil {
                        pendingError = .missingValue(option: name, command: "")
                    }
                }
                uses.append(OptionUse(name: name, display: "--" + name, value: value, index: token.index))
            }
        }

        // Resolve the command (step 2).
        guard let first = words.first else {
            if wantsVersion { return Invocation(request: .version, global: GlobalOptions()) }
            if wantsHelp { return Invocation(request: .help(topic: []), global: GlobalOptions()) }
            throw .noCommand
        }
        if first == "help" {
            return Invocation(request: .help(topic: try helpTopic(Array(words.dropFirst()))), global: GlobalOptions())
        }
        let spec: CommandSpec
        if CommandCatalog.groups[first] != nil {
            guard words.count >= 2 else {
                if wantsHelp { return Invocation(request: .help(topic: [first]), global: GlobalOptions()) }
                throw .missingSubcommand(group: first)
            }
            guard let found = CommandCatalog.command([first, words[1]]) else { throw .unknownSubcommand(group: first, words[1]) }
            spec = found
            words.removeFirst(2)
        } else if let found = CommandCatalog.command([first]) {
            spec = found
            words.removeFirst()
        } else {
            throw .unknownCommand(first, suggestion: suggestion(for: first))
        }
        if wantsHelp { return Invocation(request: .help(topic: spec.path), global: GlobalOptions()) }
        if wantsVersion { return Invocation(request: .version, global: GlobalOptions()) }
        if case .missingValue(let option, _) = pendingError { throw .missingValue(option: option, command: spec.name) }

        // Decode (step 3): global options first, then the command's own.
        var global = GlobalOptions()
        var own: [String: String?] = [:]
        var seen: Set<String> = []
        for use in uses {
            guard seen.insert(use.name).inserted else { throw .duplicateOption(option: use.name, command: spec.name) }
            let known = CommandCatalog.globalOptions.first { $0.name == use.name } ?? spec.option(named: use.name)
            guard let known, !use.name.hasPrefix("-") else { throw .unknownOption(use.display, command: spec.name) }
            if known.valueName == nil, let value = use.value {
                throw .flagWithValue(option: use.name, value: value, command: spec.name)
            }
            if known.valueName != nil, use.value?.isEmpty ?? true {
                throw .emptyValue(option: use.name, command: spec.name)
            }
            switch use.name {
            case "db": global.databasePath = use.value
            case "user": global.userID = use.value
            case "json": global.json = true
            case "no-color": global.noColor = true
            default: own[use.name] = .some(use.value)
            }
        }
        if words.count > spec.arguments.count {
            throw .unexpectedArgument(words[spec.arguments.count], command: spec.name)
        }
        if words.count < spec.arguments.count {
            throw .missingArgument(name: spec.arguments[words.count].name, command: spec.name)
        }
        let decoder = OptionDecoder(values: own, command: spec.name)
        let command = try decode(spec, words: words, options: decoder)
        return Invocation(request: .run(command, spec: spec), global: global)
    }

    // MARK: - Decoding each command (steps 3 and 4)

    private static func decode(_ spec: CommandSpec, words: [String], options: OptionDecoder) throws(ParserError) -> Command {
        switch spec.name {
        case "init": return .initialize
        case "status": return .status
        case "user add": return .userAdd(UserAddCommand(id: words[0], name: options.string("name") ?? ""))
        case "user list": return .userList
        case "post add":
            // A missing --author is checked once the database is open: on a replica it defaults to the replica's user.
            return .postAdd(PostAddCommand(authorID: options.string("author"), postID: options.string("id"), text: words[0]))
        case "post delete": return .postDelete(postID: words[0])
        case "user delete": return .userDelete(userID: words[0])
        case "feed": return .feed(try feedOptions(options, defaultLimit: Limits.defaultFeedPage))
        case "show": return .show(postID: words[0])
        case "like", "unlike", "toggle":
            let action = LikeCommand.Action(rawValue: spec.name) ?? .toggle
            return .like(LikeActionCommand(action: action, postID: words[0]))
        case "events":
            let since = try options.integer("since", in: Limits.since) ?? 0
            let limit = try options.integer("limit", in: Int64(Limits.events.lowerBound)...Int64(Limits.events.upperBound))
            return .events(EventsCommand(since: since, limit: limit.map { Int($0) }, follow: options.flag("follow")))
        case "watch": return .watch(try feedOptions(options, defaultLimit: Limits.defaultFeedPage))
        case "app": return .app(try feedOptions(options, defaultLimit: 10))
        case "seed":
            let posts = try options.int("posts", in: Limits.seedPosts) ?? Limits.defaultSeed.posts
            let users = try options.int("users", in: Limits.seedUsers) ?? Limits.defaultSeed.users
            let likes = try options.int("likes", in: Limits.seedLikes) ?? Limits.defaultSeed.likes
            let (product, overflow) = posts.multipliedReportingOverflow(by: users)
            let maximum = overflow ? Int.max : product / 2
            guard likes <= maximum else { throw .tooManyLikes(likes: likes, maximum: maximum) }
            return .seed(SeedCommand(posts: posts, users: users, likes: likes))
        case "check": return .check
        case "replica init":
            guard let source = options.string("from") else { throw .missingOption(option: "from", command: spec.name) }
            return .replicaInit(ReplicaInitCommand(source: source, token: options.string("token")))
        case "sync": return .sync(SyncCommand(follow: options.flag("follow")))
        case "token issue": return .tokenIssue(TokenIssueCommand(label: options.string("label") ?? ""))
        case "token list": return .tokenList
        case "token revoke": return .tokenRevoke(TokenRevokeCommand(id: words[0]))
        case "serve":
            var serve = try ServeCommand(listen: options.string("listen") ?? ServeCommand.defaultListen, demo: options.flag("demo"))
            serve.maximumStreams = try options.int("max-streams", in: 0...1_000_000) ?? serve.maximumStreams
            serve.maximumConnectionsPerAddress =
                try options.int("max-connections-per-ip", in: 0...1_000_000) ?? serve.maximumConnectionsPerAddress
            serve.workers = try options.int("workers", in: 1...256) ?? serve.workers
            serve.publicMetrics = options.flag("public-metrics")
            return .serve(serve)
        case "completions":
            guard let shell = CompletionShell(rawValue: words[0]) else { throw .unknownShell(words[0]) }
            return .completions(shell)
        default: return .demo
        }
    }

    private static func feedOptions(_ options: OptionDecoder, defaultLimit: Int) throws(ParserError) -> FeedCommand {
        let limit = try options.int("limit", in: Limits.feedPage) ?? defaultLimit
        var cursor: FeedCursor?
        if let text = options.string("before") {
            guard let parsed = FeedCursor(text) else { throw .invalidCursor(text, command: options.command) }
            cursor = parsed
        }
        return FeedCommand(limit: limit, before: cursor)
    }

    private static func helpTopic(_ words: [String]) throws(ParserError) -> [String] {
        guard let first = words.first else { return [] }
        if CommandCatalog.groups[first] != nil {
            guard words.count >= 2 else { return [first] }
            guard CommandCatalog.command([first, words[1]]) != nil else { throw .unknownSubcommand(group: first, words[1]) }
            return [first, words[1]]
        }
        guard CommandCatalog.command([first]) != nil else { throw .unknownCommand(first, suggestion: suggestion(for: first)) }
        return [first]
    }

    /// The known command closest to `word` (edit distance at most 2), for "Did you mean".
    static func suggestion(for word: String) -> String? {
        let candidates = CommandCatalog.topLevelNames.map { ($0, editDistance(Array(word.lowercased()), Array($0))) }
        guard let best = candidates.min(by: { $0.1 < $1.1 }), best.1 <= 2, best.1 < word.count else { return nil }
        return best.0
    }

    private static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
