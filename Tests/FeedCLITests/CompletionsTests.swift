@testable import FeedCLI
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// `feedsync completions bash|zsh|fish`: scripts generated from the command catalog, checked by the real shells
/// where they are installed (a missing shell is skipped with a notice on stderr).
// Blocks: waits for `feedsync` and `bash` child processes.
@Suite(.ownThreads) struct CompletionsTests {
    /// Every word a script must mention: command words, options (with dashes) and argument choices.
    private static var catalogWords: [String] {
        var words = Set(CommandCatalog.commands.flatMap(\.path))
        words.formUnion((CommandCatalog.globalOptions + CommandCatalog.commands.flatMap(\.options)).map { "--" + $0.name })
        for argument in CommandCatalog.commands.flatMap(\.arguments) {
            if case .choices(let choices) = argument.completion { words.formUnion(choices) }
        }
        return words.sorted()
    }

    @Test(arguments: CompletionShell.allCases)
    func scriptMentionsEveryCommandAndOption(shell: CompletionShell) {
        let script = CompletionScript.script(for: shell)
        for word in Self.catalogWords {
            // fish names options without dashes (`-l limit`).
            let needle = shell == .fish && word.hasPrefix("--") ? "-l " + word.dropFirst(2) : word
            #expect(script.contains(needle), "\(shell) script lacks \(needle)")
        }
        #expect(script.hasSuffix("\n"))
    }

    @Test func theCatalogHasTheCompletionsCommandAndHelpListsIt() {
        #expect(CommandCatalog.command(["completions"])?.database == DatabaseUse.none)
        #expect(HelpGenerator.help(for: []).contains("completions"))
        #expect(HelpGenerator.help(for: ["completions"]).contains("Usage: feedsync completions SHELL"))
        #expect(CommandCatalog.globalOptions.first { $0.name == "db" }?.completion == .file)
    }

    @Test func parserDecodesTheShellAndRefusesOthers() throws {
        let invocation = try CommandParser.parse(["completions", "zsh"])
        guard case .run(.completions(let shell), _) = invocation.request else {
            Issue.record("not a completions command: \(invocation.request)")
            return
        }
        #expect(shell == .zsh)
        #expect(throws: ParserError.unknownShell("tcsh")) { try CommandParser.parse(["completions", "tcsh"]) }
        #expect(
            ParserError.unknownShell("tcsh").message
                == "Error: unknown shell \"tcsh\" for 'completions': use bash, zsh, fish. See 'feedsync completions --help'.")
    }

    @Test func binaryPrintsTheScriptAndRefusesAnUnknownShell() throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("completions-\(UUID().uuidString)").path
        // A FEEDSYNC_DB that every database command refuses: completions never looks at it.
        let environment = CLIRun.environment(home: home, ["FEEDSYNC_DB": ":memory:"])
        let bash = try CLIRun.run(["completions", "bash"], environment: environment)
        #expect(bash.status == 0)
        #expect(bash.stdout == CompletionScript.script(for: .bash))
        #expect(bash.stderr.isEmpty)
        let bad = try CLIRun.run(["completions", "powershell"], environment: environment)
        #expect(bad.status == 64)
        #expect(bad.stdout.isEmpty)
        #expect(bad.stderr.split(separator: "\n").count == 1)
        #expect(bad.stderr.contains("\"powershell\""))
        #expect(!FileManager.default.fileExists(atPath: home))
    }

    // MARK: - Real shells

    /// The path of `name` on PATH (or a usual directory), or `nil` with a notice that the check is skipped.
    private static func shell(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        for directory in path.split(separator: ":").map(String.init) + ["/usr/bin", "/bin", "/usr/local/bin"] {
            let candidate = directory + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        FileHandle.standardError.write(Data("CompletionsTests: \(name) is not installed; skipping its check.\n".utf8))
        return nil
    }

    /// Runs `executable arguments` and returns its status, stdout and stderr.
    private static func run(_ executable: String, _ arguments: [String]) throws -> (Int32, String, String) {
        let environment = ["PATH": "/usr/bin:/bin", "HOME": FileManager.default.temporaryDirectory.path]
        let result = try SpawnedProcess.run(executable, arguments, environment: environment)
        return (result.status, result.stdout, result.stderr)
    }

    /// Writes `shell`'s script to a temporary file and returns its path.
    private static func scriptFile(_ shell: CompletionShell) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("feedsync-\(UUID().uuidString).\(shell)").path
        try Data(CompletionScript.script(for: shell).utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(arguments: CompletionShell.allCases)
    func syntaxIsValidForTheRealShell(shell: CompletionShell) throws {
        guard let executable = Self.shell(shell.rawValue) else { return }
        let file = try Self.scriptFile(shell)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let check = shell == .fish ? ["--no-execute", file] : ["-n", file]
        let (status, _, errors) = try Self.run(executable, check)
        #expect(status == 0, "\(shell) -n: \(errors)")
    }

    /// What bash's `_feedsync` offers for the command line `words` (the cursor in the last word).
    private static func bashCompletions(_ words: [String], script: String, bash: String) throws -> [String] {
        let quotedWords = words.map { "'" + $0 + "'" }.joined(separator: " ")
        let program = """
            source '\(script)'
            COMP_WORDS=(\(quotedWords)); COMP_CWORD=\(words.count - 1); COMPREPLY=()
            _feedsync
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let (status, output, errors) = try run(bash, ["-c", program])
        #expect(status == 0, "bash: \(errors)")
        return output.split(separator: "\n").map(String.init)
    }

    @Test func bashCompletesCommandsOptionsAndValues() throws {
        guard let bash = Self.shell("bash") else { return }
        let file = try Self.scriptFile(.bash)
        defer { try? FileManager.default.removeItem(atPath: file) }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("completions-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try Data().write(to: directory.appendingPathComponent("feed.sqlite"))

        func complete(_ words: String...) throws -> [String] { try Self.bashCompletions(words, script: file, bash: bash) }
        #expect(try complete("feedsync", "fe") == ["feed"])
        #expect(try complete("feedsync", "user", "") == ["add", "list", "delete"])
        #expect(try complete("feedsync", "--db", "x.sqlite", "--user", "bob", "li") == ["like"])
        #expect(try complete("feedsync", "feed", "--l") == ["--limit"])
        #expect(try complete("feedsync", "user", "add", "--n") == ["--name", "--no-color"])
        #expect(try complete("feedsync", "completions", "") == ["bash", "zsh", "fish"])
        #expect(try complete("feedsync", "help", "wa") == ["watch"])
        #expect(try complete("feedsync", "--limit", "=", "5", "sh") == ["show"])
        #expect(try complete("feedsync", "feed", "--limit", "") == [])
        let prefix = directory.path + "/fe"
        #expect(try complete("feedsync", "--db", prefix) == [directory.path + "/feed.sqlite"])
        #expect(try complete("feedsync", "--db", "=", prefix) == [directory.path + "/feed.sqlite"])
        // Every top-level command is offered for an empty word.
        #expect(try complete("feedsync", "") == CommandCatalog.topLevelNames)
    }
}
