internal import FeedJSON
internal import FeedSync
internal import Foundation

/// Runs decoded commands (STYLE §12 step 5). Each command computes its whole result before printing, so a
/// failure writes nothing on stdout.
struct CommandRunner: Sendable {
    /// Settings, console and database access.
    let context: CommandContext

    var console: Console { context.console }
    var json: Bool { context.settings.json }

    /// Runs `command` and returns its exit status; failures are thrown.
    func run(_ command: Command) async throws(CLIError) -> ExitCode {
        switch command {
        case .initialize: return try initialize()
        case .status: return try status()
        case .userAdd(let command): return try userAdd(command)
        case .userList: return try userList()
        case .postAdd(let command): return try postAdd(command)
        case .postDelete(let postID): return try postDelete(postID)
        case .userDelete(let userID): return try userDelete(userID)
        case .feed(let command): return try feed(command)
        case .show(let postID): return try show(postID)
        case .like(let command): return try like(command)
        case .events(let command): return try await events(command)
        case .watch(let command): return try await watch(command)
        case .app(let command): return try await app(command)
        case .seed(let command): return try seed(command)
        case .check: return try check()
        case .demo: return try demo()
        case .replicaInit(let command): return try await replicaInit(command)
        case .sync(let command): return try await sync(command)
        case .tokenIssue(let command): return try tokenIssue(command)
        case .tokenList: return try tokenList()
        case .tokenRevoke(let command): return try tokenRevoke(command)
        case .serve(let command): return try await serve(command)
        case .completions(let shell):
            console.out(CompletionScript.script(for: shell))
            return .success
        }
    }

    /// Runs a library call, turning its error into a ``CLIError``.
    func attempt<T>(_ body: () throws(FeedError) -> T) throws(CLIError) -> T {
        do {
            return try body()
        } catch {
            throw CLIError(error)
        }
    }

    /// Prints one JSON value on its own line.
    func printJSON(_ value: JSONValue) {
        console.line(value.rendered)
    }

    /// Prints lines at once.
    func printLines(_ lines: [String]) {
        guard !lines.isEmpty else { return }
        console.out(lines.joined(separator: "\n") + "\n")
    }
}
