import Foundation

/// The console sessions of a Markdown file: every fenced block tagged `console`, parsed into commands and what each
/// prints.
///
/// Conventions (they are what a reader would assume of a shell transcript):
/// - a line starting with `$ ` is a command, run by `bash -c` with the built `feedsync` first on `PATH`; text after
///   two spaces and a `#` is a comment;
/// - the lines up to the next command are what it prints (standard output, then standard error);
/// - `# exit status N` at the end of an output line gives a status other than 0; other comments after two spaces and
///   a `#` are dropped;
/// - a line `…` ends the comparison of that command's output (the rest is elided); `…` inside a line stands for any
///   text;
/// - a command that runs until Ctrl-C (`serve`, `watch`, anything with `--follow`) is left running once it has
///   printed the lines shown, and is stopped once the file's last console block has run;
/// - `export NAME=VALUE` sets `NAME` for the commands after it, with the shell's expansions (`$(…)`).
struct DocSession: Sendable {
    struct Step: Sendable, CustomStringConvertible {
        var command: String
        var line: Int
        var expected: [String] = []
        var status: Int32 = 0
        var elided = false

        var description: String { "line \(line): $ \(command)" }

        /// Whether the command runs until it is interrupted.
        var runsUntilInterrupted: Bool {
            let words = command.split(separator: " ").map(String.init)
            return words.contains("--follow") || words.contains("serve") || words.contains("watch")
        }

        /// The variable an `export NAME=VALUE` command sets, and its value as written.
        var export: (name: String, value: String)? {
            guard command.hasPrefix("export "), let equals = command.firstIndex(of: "=") else { return nil }
            let name = command[command.index(command.startIndex, offsetBy: 7)..<equals]
            return (String(name), String(command[command.index(after: equals)...]))
        }
    }

    /// The block's first line (1-based), for messages.
    var line: Int
    var steps: [Step]

    /// Whether the session needs a PostgreSQL server: it names one of the documentation's example URLs.
    var needsPostgres: Bool { steps.contains { step in Self.postgresExamples.contains { step.command.contains($0) } } }

    /// The PostgreSQL URLs the documentation's sessions use (with a password, and without one for a password that
    /// comes from elsewhere); a test database's URL stands in for both. The first is printed as the second.
    static let postgresExamples = ["postgresql://app:secret@db.internal:5432/feed", "postgresql://app@db.internal:5432/feed"]

    /// Every console session of `text`, in order.
    static func sessions(in text: String) -> [DocSession] {
        var sessions: [DocSession] = []
        var current: DocSession?
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).enumerated() {
            if current == nil {
                if line == "```console" { current = DocSession(line: index + 1, steps: []) }
                continue
            }
            if line == "```" {
                sessions.append(current!)
                current = nil
                continue
            }
            if line.hasPrefix("$ ") {
                current!.steps.append(Step(command: dropComment(String(line.dropFirst(2))), line: index + 1))
                continue
            }
            guard let last = current!.steps.indices.last, !current!.steps[last].elided else { continue }
            if line == "…" {
                current!.steps[last].elided = true
                continue
            }
            var output = line
            if let marker = output.range(of: #"\s+# exit status (\d+)$"#, options: .regularExpression) {
                current!.steps[last].status = Int32(output[marker].split(separator: " ").last ?? "") ?? -1
                output.removeSubrange(marker)
            }
            current!.steps[last].expected.append(dropComment(output))
        }
        return sessions
    }

    /// `text` without a trailing comment (two spaces or more, then `# `).
    static func dropComment(_ text: String) -> String {
        guard let comment = text.range(of: #"\s{2,}# .*$"#, options: .regularExpression) else { return text }
        return String(text[..<comment.lowerBound])
    }

    /// `text` with what changes from run to run (times, token secrets) replaced by fixed words.
    static func normalized(_ text: String) -> String {
        var text = text
        for (pattern, word) in [
            (#"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z"#, "<time>"),
            (#"\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)?"#, "<time>"),
            (#"fst_[A-Za-z0-9_-]+"#, "<token>"),
        ] {
            text = text.replacingOccurrences(of: pattern, with: word, options: .regularExpression)
        }
        return text
    }

    /// Whether a printed line matches a shown one: equal once normalized, `…` in the shown one standing for any text.
    static func matches(_ printed: String, _ shown: String) -> Bool {
        let printed = normalized(printed)
        let parts = normalized(shown).components(separatedBy: "…")
        guard parts.count > 1 else { return printed == parts[0] }
        guard printed.hasPrefix(parts[0]), printed.hasSuffix(parts[parts.count - 1]),
            printed.count >= parts[0].count + parts[parts.count - 1].count
        else { return false }
        var rest = printed.dropFirst(parts[0].count).dropLast(parts[parts.count - 1].count)
        for part in parts.dropFirst().dropLast() where !part.isEmpty {
            guard let found = rest.range(of: part) else { return false }
            rest = rest[found.upperBound...]
        }
        return true
    }
}
