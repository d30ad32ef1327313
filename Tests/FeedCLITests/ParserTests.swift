@testable import FeedCLI
import FeedSync
import Testing

@Suite struct ParserTests {
    // MARK: - Every error path

    struct Failure: Sendable, CustomTestStringConvertible {
        let arguments: [String]
        let error: ParserError
        var testDescription: String { arguments.joined(separator: " ") }
    }

    static let failures: [Failure] = [
        Failure(arguments: [], error: .noCommand),
        Failure(arguments: ["--json"], error: .noCommand),
        Failure(arguments: ["fed"], error: .unknownCommand("fed", suggestion: "feed")),
        Failure(arguments: ["zzzzzz"], error: .unknownCommand("zzzzzz", suggestion: nil)),
        Failure(arguments: ["user"], error: .missingSubcommand(group: "user")),
        Failure(arguments: ["post"], error: .missingSubcommand(group: "post")),
        Failure(arguments: ["user", "remove"], error: .unknownSubcommand(group: "user", "remove")),
        Failure(arguments: ["help", "nope"], error: .unknownCommand("nope", suggestion: nil)),
        Failure(arguments: ["help", "user", "nope"], error: .unknownSubcommand(group: "user", "nope")),
        Failure(arguments: ["feed", "--bogus"], error: .unknownOption("--bogus", command: "feed")),
        Failure(arguments: ["feed", "-x"], error: .unknownOption("-x", command: "feed")),
        Failure(arguments: ["feed", "--since", "3"], error: .unknownOption("--since", command: "feed")),
        Failure(arguments: ["feed", "--limit"], error: .missingValue(option: "limit", command: "feed")),
        Failure(arguments: ["feed", "--limit", "--json"], error: .missingValue(option: "limit", command: "feed")),
        Failure(arguments: ["feed", "--limit", "--", "5"], error: .missingValue(option: "limit", command: "feed")),
        Failure(arguments: ["feed", "--db"], error: .missingValue(option: "db", command: "feed")),
        Failure(arguments: ["feed", "--json=yes"], error: .flagWithValue(option: "json", value: "yes", command: "feed")),
        Failure(arguments: ["events", "--follow=1"], error: .flagWithValue(option: "follow", value: "1", command: "events")),
        Failure(arguments: ["feed", "--limit", "5", "--limit=6"], error: .duplicateOption(option: "limit", command: "feed")),
        Failure(arguments: ["feed", "--json", "--json"], error: .duplicateOption(option: "json", command: "feed")),
        Failure(arguments: ["feed", "extra"], error: .unexpectedArgument("extra", command: "feed")),
        Failure(arguments: ["show", "a", "b"], error: .unexpectedArgument("b", command: "show")),
        Failure(arguments: ["post", "add", "--author", "a", "hello", "world"], error: .unexpectedArgument("world", command: "post add")),
        Failure(arguments: ["show"], error: .missingArgument(name: "POST", command: "show")),
        Failure(arguments: ["like"], error: .missingArgument(name: "POST", command: "like")),
        Failure(arguments: ["user", "add"], error: .missingArgument(name: "ID", command: "user add")),
        Failure(arguments: ["post", "add", "--author", "a"], error: .missingArgument(name: "TEXT", command: "post add")),
        Failure(arguments: ["replica", "init", "--user", "a"], error: .missingOption(option: "from", command: "replica init")),
        Failure(arguments: ["replica"], error: .missingSubcommand(group: "replica")),
        Failure(arguments: ["sync", "--follow=1"], error: .flagWithValue(option: "follow", value: "1", command: "sync")),
        Failure(arguments: ["feed", "--limit", "0"], error: .invalidNumber(option: "limit", value: "0", range: 1...1000, command: "feed")),
        Failure(
            arguments: ["feed", "--limit", "-5"], error: .invalidNumber(option: "limit", value: "-5", range: 1...1000, command: "feed")),
        Failure(
            arguments: ["feed", "--limit", "1001"], error: .invalidNumber(option: "limit", value: "1001", range: 1...1000, command: "feed")),
        Failure(
            arguments: ["feed", "--limit", "abc"], error: .invalidNumber(option: "limit", value: "abc", range: 1...1000, command: "feed")),
        Failure(
            arguments: ["feed", "--limit", "99999999999999999999"],
            error: .invalidNumber(option: "limit", value: "99999999999999999999", range: 1...1000, command: "feed")),
        Failure(arguments: ["feed", "--limit", "５"], error: .invalidNumber(option: "limit", value: "５", range: 1...1000, command: "feed")),
        Failure(
            arguments: ["events", "--since", "-1"],
            error: .invalidNumber(option: "since", value: "-1", range: 0...Int64.max, command: "events")),
        Failure(
            arguments: ["events", "--limit", "0"],
            error: .invalidNumber(option: "limit", value: "0", range: 1...1_000_000, command: "events")),
        Failure(
            arguments: ["seed", "--posts", "0"], error: .invalidNumber(option: "posts", value: "0", range: 1...10_000_000, command: "seed")),
        Failure(
            arguments: ["seed", "--users", "2000000"],
            error: .invalidNumber(option: "users", value: "2000000", range: 1...1_000_000, command: "seed")),
        Failure(
            arguments: ["seed", "--likes", "-1"],
            error: .invalidNumber(option: "likes", value: "-1", range: 0...100_000_000, command: "seed")),
        Failure(arguments: ["seed", "--posts", "2", "--users", "2", "--likes", "3"], error: .tooManyLikes(likes: 3, maximum: 2)),
        Failure(arguments: ["app", "--limit", "0"], error: .invalidNumber(option: "limit", value: "0", range: 1...1000, command: "app")),
        Failure(arguments: ["feed", "--before", "nonsense"], error: .invalidCursor("nonsense", command: "feed")),
        Failure(arguments: ["feed", "--before", "1.-2"], error: .invalidCursor("1.-2", command: "feed")),
        Failure(arguments: ["feed", "--db="], error: .emptyValue(option: "db", command: "feed")),
        Failure(arguments: ["feed", "--user", ""], error: .emptyValue(option: "user", command: "feed")),
    ]

    @Test(arguments: failures)
    func rejects(_ failure: Failure) {
        #expect(throws: failure.error) { try CommandParser.parse(failure.arguments) }
    }

    @Test(arguments: failures)
    func everyErrorIsOneLineNamingTheHelpToRead(_ failure: Failure) {
        let message = failure.error.message
        #expect(message.hasPrefix("Error: "))
        #expect(!message.contains("\n"))
        #expect(message.hasSuffix("See 'feedsync \(failure.error.helpCommand.map { $0 + " " } ?? "")--help'."))
    }

    @Test func messagesNameTheValueAndTheFix() {
        #expect(
            ParserError.invalidNumber(option: "limit", value: "0", range: 1...1000, command: "feed").message
                == "Error: invalid value \"0\" for --limit: use a whole number from 1 to 1000. See 'feedsync feed --help'.")
        #expect(
            ParserError.unknownCommand("fed", suggestion: "feed").message
                == "Error: unknown command \"fed\" (did you mean 'feed'?). See 'feedsync --help'.")
        #expect(
            ParserError.missingUser(command: "like").message
                == "Error: 'like' acts as a user: pass --user ID or set FEEDSYNC_USER. See 'feedsync like --help'.")
        #expect(
            ParserError.unknownOption("--x\u{1B}[31m", command: "feed").message
                == "Error: unknown option \"--x\\u{1B}[31m\" for 'feed'. See 'feedsync feed --help'.")
    }

    // MARK: - Decoding

    struct Success: Sendable, CustomTestStringConvertible {
        let arguments: [String]
        let command: Command
        var testDescription: String { arguments.joined(separator: " ") }
    }

    static let successes: [Success] = [
        Success(arguments: ["init"], command: .initialize),
        Success(arguments: ["status"], command: .status),
        Success(arguments: ["user", "add", "alice", "--name", "Alice A"], command: .userAdd(UserAddCommand(id: "alice", name: "Alice A"))),
        Success(arguments: ["user", "add", "bob"], command: .userAdd(UserAddCommand(id: "bob", name: ""))),
        Success(arguments: ["user", "list"], command: .userList),
        Success(
            arguments: ["post", "add", "--author", "a", "--id", "p1", "hi there"],
            command: .postAdd(PostAddCommand(authorID: "a", postID: "p1", text: "hi there"))),
        Success(
            arguments: ["post", "add", "--author=a", "--", "--not an option"],
            command: .postAdd(PostAddCommand(authorID: "a", postID: nil, text: "--not an option"))),
        Success(arguments: ["feed"], command: .feed(FeedCommand(limit: 20, before: nil))),
        Success(
            arguments: ["feed", "--limit", "1000", "--before", "1600000000000.42"],
            command: .feed(FeedCommand(limit: 1000, before: FeedCursor(createdAtMillis: 1_600_000_000_000, sequence: 42)))),
        Success(arguments: ["show", "post3"], command: .show(postID: "post3")),
        Success(arguments: ["like", "post3"], command: .like(LikeActionCommand(action: .like, postID: "post3"))),
        Success(arguments: ["unlike", "post3"], command: .like(LikeActionCommand(action: .unlike, postID: "post3"))),
        Success(arguments: ["toggle", "post3"], command: .like(LikeActionCommand(action: .toggle, postID: "post3"))),
        Success(arguments: ["events"], command: .events(EventsCommand(since: 0, limit: nil, follow: false))),
        Success(
            arguments: ["events", "--since", "5", "--limit", "2", "--follow"],
            command: .events(EventsCommand(since: 5, limit: 2, follow: true))),
        Success(arguments: ["watch"], command: .watch(FeedCommand(limit: 20, before: nil))),
        Success(arguments: ["app"], command: .app(FeedCommand(limit: 10, before: nil))),
        Success(arguments: ["seed"], command: .seed(SeedCommand(posts: 1000, users: 100, likes: 5000))),
        Success(
            arguments: ["seed", "--posts", "5", "--users", "3", "--likes", "7"], command: .seed(SeedCommand(posts: 5, users: 3, likes: 7))),
        Success(arguments: ["check"], command: .check),
        Success(arguments: ["demo"], command: .demo),
    ]

    @Test(arguments: successes)
    func decodes(_ success: Success) throws {
        let invocation = try CommandParser.parse(success.arguments)
        guard case .run(let command, _) = invocation.request else {
            Issue.record("expected a command, got \(invocation.request)")
            return
        }
        #expect(command == success.command)
    }

    @Test func globalOptionsGoAnywhere() throws {
        let invocation = try CommandParser.parse(["--db", "/tmp/a.sqlite", "feed", "--json", "--user=alice", "--no-color", "--limit", "3"])
        #expect(invocation.global == GlobalOptions(databasePath: "/tmp/a.sqlite", userID: "alice", json: true, noColor: true))
        guard case .run(.feed(let feed), _) = invocation.request else { throw CancellationError() }
        #expect(feed.limit == 3)
    }

    @Test(arguments: [
        (["--help"], [String]()), (["-h"], []), (["help"], []), (["feed", "--help"], ["feed"]), (["--help", "feed"], ["feed"]),
        (["user", "-h"], ["user"]), (["user", "add", "--help"], ["user", "add"]), (["help", "post", "add"], ["post", "add"]),
        (["feed", "--bogus", "-h"], ["feed"]), (["feed", "--limit", "-h"], ["feed"]),
    ])
    func helpWinsEverywhere(arguments: [String], topic: [String]) throws {
        #expect(try CommandParser.parse(arguments).request == .help(topic: topic))
    }

    @Test func versionIsACleanExit() throws {
        #expect(try CommandParser.parse(["--version"]).request == .version)
        #expect(try CommandParser.parse(["feed", "--version"]).request == .version)
    }

    // MARK: - Environment (validation after decoding)

    static let feedSpec = CommandCatalog.command(["feed"])!
    static let likeSpec = CommandCatalog.command(["like"])!
    static let notTerminal = TerminalInfo(stdinIsTerminal: false, stdoutIsTerminal: false, stderrIsTerminal: false)
    static let terminal = TerminalInfo(stdinIsTerminal: true, stdoutIsTerminal: true, stderrIsTerminal: true)

    @Test func databasePathComesFromTheOptionThenTheEnvironment() throws {
        let environment = ["FEEDSYNC_DB": "/env.sqlite", "HOME": "/home/x"]
        var global = GlobalOptions()
        #expect(
            try Settings(global: global, spec: Self.feedSpec, environment: environment, terminal: Self.notTerminal).databasePath
                == "/env.sqlite")
        global.databasePath = "/opt.sqlite"
        #expect(
            try Settings(global: global, spec: Self.feedSpec, environment: environment, terminal: Self.notTerminal).databasePath
                == "/opt.sqlite")
        #expect(
            try Settings(global: GlobalOptions(), spec: Self.feedSpec, environment: ["XDG_DATA_HOME": "/xdg"], terminal: Self.notTerminal)
                .databasePath == "/xdg/feedsync/feedsync.sqlite")
        #expect(
            try Settings(global: GlobalOptions(), spec: Self.feedSpec, environment: ["HOME": "/home/x"], terminal: Self.notTerminal)
                .databasePath == "/home/x/.local/share/feedsync/feedsync.sqlite")
    }

    @Test func viewerCommandsNeedAUser() throws {
        #expect(throws: ParserError.missingUser(command: "like")) {
            try Settings(global: GlobalOptions(), spec: Self.likeSpec, environment: [:], terminal: Self.notTerminal)
        }
        #expect(throws: ParserError.missingUser(command: "like")) {
            try Settings(global: GlobalOptions(), spec: Self.likeSpec, environment: ["FEEDSYNC_USER": ""], terminal: Self.notTerminal)
        }
        #expect(
            try Settings(global: GlobalOptions(), spec: Self.likeSpec, environment: ["FEEDSYNC_USER": "bob"], terminal: Self.notTerminal)
                .userID == "bob")
        let global = GlobalOptions(userID: "alice")
        #expect(
            try Settings(global: global, spec: Self.likeSpec, environment: ["FEEDSYNC_USER": "bob"], terminal: Self.notTerminal).userID
                == "alice")
    }

    @Test func colourOnlyOnATerminalWithoutNoColor() throws {
        func color(_ global: GlobalOptions, _ environment: [String: String], _ terminal: TerminalInfo) throws -> Bool {
            try Settings(global: global, spec: Self.feedSpec, environment: environment, terminal: terminal).color
        }
        #expect(try color(GlobalOptions(), [:], Self.terminal))
        #expect(try !color(GlobalOptions(), [:], Self.notTerminal))
        #expect(try !color(GlobalOptions(), ["NO_COLOR": "1"], Self.terminal))
        #expect(try !color(GlobalOptions(noColor: true), [:], Self.terminal))
    }
}
