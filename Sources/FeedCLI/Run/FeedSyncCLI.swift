internal import FeedSync

#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// The `feedsync` command: parses the arguments, runs the command and returns the exit status.
///
/// `main.swift` only forwards to ``run(arguments:environment:)``:
///
/// ```swift
/// import FeedCLI
/// exit(await FeedSyncCLI.run(arguments: Array(CommandLine.arguments.dropFirst())))
/// ```
///
/// Results go to stdout, errors (one line each) and progress to stderr.
public enum FeedSyncCLI {
    /// The version `--version` prints.
    public static let version = "0.1.0"

    /// Runs `feedsync` with `arguments` (without the program name) and returns its exit status.
    ///
    /// - Parameters:
    ///   - arguments: the command line after the program name.
    ///   - environment: the variables to read (`FEEDSYNC_DB`, `FEEDSYNC_USER`, `NO_COLOR`, `XDG_DATA_HOME`, `HOME`);
    ///     `nil` for this process's.
    public static func run(arguments: [String], environment: [String: String]? = nil) async -> Int32 {
        await run(arguments: arguments, environment: environment, handsOffPostgreSQL: false)
    }

    private static func run(arguments: [String], environment: [String: String]?, handsOffPostgreSQL: Bool) async -> Int32 {
        let console = Console()
        let environment = environment ?? ProcessEnvironment.current()
        do throws(CLIError) {
            let code = try await execute(
                arguments: arguments, environment: environment, console: console, handsOffPostgreSQL: handsOffPostgreSQL)
            return code.rawValue
        } catch {
            console.error(error.message)
            return error.exitCode.rawValue
        }
    }

    /// Runs `feedsync` with the raw command line: each argument is `nil` when its bytes are not valid UTF-8, which
    /// is refused (exit 65) before anything is parsed or opened, instead of silently storing replacement characters.
    ///
    /// This is the `feedsync` executable's entry point: a build that cannot open PostgreSQL itself (the fully static
    /// install build) hands a command on a `postgresql://` location to `feedsync-postgres` (see `PostgresHandOff`),
    /// replacing this process.
    public static func run(rawArguments: [String?], environment: [String: String]? = nil) async -> Int32 {
        // Past a file size limit (RLIMIT_FSIZE, `ulimit -f`) a write raises SIGXFSZ, which would end the process with
        // no message; ignored, the write fails with EFBIG instead, SQLite rolls the transaction back, and the
        // command reports it in one line (status 74). https://pubs.opengroup.org/onlinepubs/9799919799/functions/write.html
        signal(SIGXFSZ, SIG_IGN)
        if let index = rawArguments.firstIndex(where: { $0 == nil }) {
            Console().error("Error: argument \(index + 1) is not valid UTF-8 text. Pass ids and text as UTF-8.")
            return ExitCode.data.rawValue
        }
        return await run(arguments: rawArguments.compactMap { $0 }, environment: environment, handsOffPostgreSQL: true)
    }

    private static func execute(
        arguments: [String], environment: [String: String], console: Console, handsOffPostgreSQL: Bool
    ) async throws(CLIError) -> ExitCode {
        let invocation: Invocation
        do {
            invocation = try CommandParser.parse(arguments)
        } catch {
            throw CLIError(error)
        }
        switch invocation.request {
        case .version:
            console.line("feedsync \(version)")
            return .success
        case .help(let topic):
            console.out(HelpGenerator.help(for: topic))
            return .success
        case .run(.completions(let shell), _):
            // Needs no settings: works whatever FEEDSYNC_DB holds.
            console.out(CompletionScript.script(for: shell))
            return .success
        case .run(let command, let spec):
            let terminal = TerminalInfo.current
            let settings: Settings
            do {
                settings = try Settings(global: invocation.global, spec: spec, environment: environment, terminal: terminal)
            } catch .missingUser where spec.actsAsReplicaUser {
                // On a replica the command acts as the replica's user: the command checks once the database is open.
                do {
                    settings = try Settings(
                        global: invocation.global, spec: spec, environment: environment, terminal: terminal, requiringUser: false)
                } catch {
                    throw CLIError(error)
                }
            } catch {
                throw CLIError(error)
            }
            if handsOffPostgreSQL, case .postgreSQL = settings.location, !FeedBackends.opensPostgreSQL {
                try PostgresHandOff.handOff(arguments: arguments, environment: environment)
            }
            let context = CommandContext(
                settings: settings, console: console, environment: environment, terminal: terminal, databaseUse: spec.database,
                commandName: spec.name)
            #if !HTTP
                // A build without HTTP (the fully static install build) hands `serve`, and syncing with an
                // `http(s)://` source, to the full build beside it.
                if handsOffPostgreSQL {
                    let limitation: String? =
                        switch command {
                        case .serve: PostgresHandOff.noHTTP
                        case .replicaInit(let replica) where PostgresHandOff.isHTTP(replica.source):
                            PostgresHandOff.noHTTPClient
                        case .sync where context.replicaSource().map(PostgresHandOff.isHTTP) == true:
                            PostgresHandOff.noHTTPClient
                        default: nil
                        }
                    if let limitation {
                        try PostgresHandOff.handOff(arguments: arguments, environment: environment, limitation: limitation)
                    }
                }
            #endif
            return try await CommandRunner(context: context).run(command)
        }
    }
}
