import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// The README's console session, run command by command with the built `feedsync` and compared line by line, so
/// that the README never drifts from what the tool prints.
///
/// Conventions of the session: a line starting with `$ feedsync` is a command (arguments split as a shell would,
/// double quotes group), the lines up to the next command are what it prints (standard output, then standard error),
/// `# exit status N` at the end of an output line gives a status other than 0, and a line `…` ends the comparison of
/// that command's output (the rest is elided). The database path `/tmp/f.sqlite` stands for a fresh file.
// Blocks: waits for each README step's `feedsync` child process.
@Suite(.ownThreads) struct ReadmeSessionTests {
    struct Step: CustomStringConvertible {
        var arguments: [String]
        var expected: [String] = []
        var status: Int32 = 0
        var elided = false

        var description: String { "feedsync " + arguments.joined(separator: " ") }
    }

    @Test func theREADMEsConsoleSessionPrintsWhatItShows() throws {
        let home = TemporaryDirectory("feedsync-readme")
        let database = home.file("f.sqlite")
        let steps = try Self.steps(in: Self.readme(), database: database)
        #expect(steps.count >= 5, "the README's console session was not found")
        for step in steps {
            let result = try CLIRun.run(step.arguments, environment: CLIRun.environment(home: home.path))
            let printed = Self.lines(result.stdout) + Self.lines(result.stderr)
            #expect(result.status == step.status, "\(step): exit status \(result.status)\n\(result.stderr)")
            if step.elided {
                #expect(Array(printed.prefix(step.expected.count)) == step.expected, "\(step)")
            } else {
                #expect(printed == step.expected, "\(step)")
            }
        }
    }

    /// The README's text.
    static func readme() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
    }

    /// The steps of the first `console` block, with `/tmp/f.sqlite` replaced by `database`.
    static func steps(in readme: String, database: String) throws -> [Step] {
        let lines = readme.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(of: "```console") else { return [] }
        var steps: [Step] = []
        for line in lines[(start + 1)...] {
            if line == "```" { break }
            let text = line.replacingOccurrences(of: "/tmp/f.sqlite", with: database)
            if text.hasPrefix("$ feedsync") {
                steps.append(Step(arguments: Array(try words(String(text.dropFirst(2))).dropFirst())))
                continue
            }
            guard !steps.isEmpty, !steps[steps.count - 1].elided else { continue }
            if text == "…" {
                steps[steps.count - 1].elided = true
                continue
            }
            var output = text
            if let marker = output.range(of: #"\s+# exit status (\d+)$"#, options: .regularExpression) {
                steps[steps.count - 1].status = Int32(output[marker].split(separator: " ").last ?? "") ?? -1
                output.removeSubrange(marker)
            }
            steps[steps.count - 1].expected.append(output)
        }
        return steps
    }

    /// Splits a command line into words: spaces separate, double quotes group (no escapes inside).
    static func words(_ line: String) throws -> [String] {
        var words: [String] = []
        var current = ""
        var quoted = false
        var started = false
        for character in line {
            switch character {
            case "\"":
                quoted.toggle()
                started = true
            case " " where !quoted:
                if started { words.append(current) }
                current = ""
                started = false
            default:
                current.append(character)
                started = true
            }
        }
        if quoted { throw CocoaError(.formatting, userInfo: [NSLocalizedDescriptionKey: "unbalanced quote in \(line)"]) }
        if started { words.append(current) }
        return words
    }

    private static func lines(_ text: String) -> [String] {
        guard !text.isEmpty else { return [] }
        return text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLast(text.hasSuffix("\n") ? 1 : 0)
    }
}
