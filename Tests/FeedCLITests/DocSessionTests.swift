import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Every console session in the README, `Docs/` and the DocC catalog, run command by command with the built
/// `feedsync` and compared line by line (conventions: ``DocSession``), so that no example drifts from what the tool
/// prints.
///
/// Each file's sessions run in order in one fresh directory, which is also `HOME` and the working directory: a
/// database a session creates is there for the next one, as for a reader who follows along. The paths the documents
/// use stand for places inside it: `/tmp/…`, `/srv/…` and `/home/me` (the documents' home); `127.0.0.1:8080` stands
/// for a free port, and the example PostgreSQL URL for a fresh database on the test server (sessions that name it are
/// skipped without one, as the other PostgreSQL tests are).
// Blocks: waits for each step's child process.
@Suite(.ownThreads) struct DocSessionTests {
    /// The repository's root.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The files with console sessions, relative to the root.
    static let files: [String] = {
        var files = ["README.md"]
        for folder in ["Docs", "Sources/FeedSync/FeedSync.docc"] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(folder).path)) ?? []
            files += names.filter { $0.hasSuffix(".md") }.sorted().map { "\(folder)/\($0)" }
        }
        return files.filter { !DocSession.sessions(in: text(of: $0)).isEmpty }
    }()

    static func text(of file: String) -> String {
        (try? String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)) ?? ""
    }

    @Test func theREADMEsSessionIsFound() {
        let sessions = DocSession.sessions(in: Self.text(of: "README.md"))
        #expect((sessions.first?.steps.count ?? 0) >= 5, "the README's console session was not found")
        #expect(Self.files.contains("Docs/CLI.md"))
    }

    @Test(arguments: files) func everySessionPrintsWhatItShows(_ file: String) throws {
        let run = try DocSessionRun(file: file)
        defer { run.finish() }
        for session in DocSession.sessions(in: Self.text(of: file)) {
            try run.play(session)
        }
    }
}

/// One file's sessions being played: the directory, the environment the `export`s built, the commands left running.
final class DocSessionRun {
    let file: String
    let directory: TemporaryDirectory
    var environment: [String: String]
    var substitutions: [(shown: String, real: String)]
    /// Printed text that stands for a shown one (the test database's URL, as printed, for the example URL).
    var printedSubstitutions: [(printed: String, shown: String)] = []
    var running: [RunningCommand] = []
    var database: PostgresTestDatabase?

    init(file: String) throws {
        self.file = file
        directory = TemporaryDirectory("feedsync-docs")
        for folder in ["home", "tmp", "srv"] {
            try FileManager.default.createDirectory(atPath: directory.file(folder), withIntermediateDirectories: true)
        }
        let binaries = URL(fileURLWithPath: CLIRun.executable).deletingLastPathComponent().path
        environment = CLIRun.environment(home: directory.file("home"))
        environment["PATH"] = binaries + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        substitutions = [
            ("/home/me", directory.file("home")), ("/tmp/", directory.file("tmp") + "/"),
            ("/srv/", directory.file("srv") + "/"), ("127.0.0.1:8080", "127.0.0.1:\(try FreePort.pick())"),
        ]
    }

    func finish() {
        for command in running { command.stop() }
        running = []
        database?.drop()
    }

    func play(_ session: DocSession) throws {
        if session.needsPostgres {
            if database == nil { database = try PostgresTestDatabase.make("docs") }
            guard let database else { return }
            if !substitutions.contains(where: { $0.real == database.url }) {
                substitutions += DocSession.postgresExamples.map { ($0, database.url) }
                printedSubstitutions.append((Self.withoutPassword(database.url), DocSession.postgresExamples[1]))
            }
        }
        for step in session.steps {
            let command = substituted(step.command)
            if let (name, value) = step.export {
                let result = try shell("\(name)=\(substituted(value)); printf %s \"$\(name)\"")
                environment[name] = result.stdout
                // What the command substitution's commands print on standard error reaches the terminal.
                compare(Self.lines(result.stderr).map(printedAsShown), step.expected, step: step, elided: step.elided)
                continue
            }
            if step.runsUntilInterrupted {
                let process = try RunningCommand(command, environment: environment, directory: directory.path)
                running.append(process)
                let printed = process.waitForLines(step.expected.count, timeout: 30).map(printedAsShown)
                compare(printed, step.expected, step: step, elided: true)
                continue
            }
            let result = try shell(command)
            let printed = (Self.lines(result.stdout) + Self.lines(result.stderr)).map(printedAsShown)
            #expect(result.status == step.status, "\(file) \(step): exit status \(result.status)\n\(result.stderr)")
            compare(printed, step.expected, step: step, elided: step.elided)
        }
    }

    func compare(_ printed: [String], _ shown: [String], step: DocSession.Step, elided: Bool) {
        let compared = elided ? Array(printed.prefix(shown.count)) : printed
        let same = compared.count == shown.count && zip(compared, shown).allSatisfy { DocSession.matches($0, $1) }
        #expect(same, "\(file) \(step) printed:\n\(compared.joined(separator: "\n"))\nshown:\n\(shown.joined(separator: "\n"))")
    }

    func substituted(_ text: String) -> String {
        Self.replacing(substitutions.map { ($0.shown, $0.real) }, in: text)
    }

    /// A printed line in the documents' terms: the real directory and port back to the shown ones.
    func printedAsShown(_ line: String) -> String {
        Self.replacing(printedSubstitutions.map { ($0.printed, $0.shown) } + substitutions.map { ($0.real, $0.shown) }, in: line)
    }

    /// `text` with each pair's first string replaced by its second, in one pass: a replacement is never replaced again
    /// (the run's directory is itself under `/tmp/`).
    static func replacing(_ pairs: [(String, String)], in text: String) -> String {
        var marked = text
        for (index, pair) in pairs.enumerated() { marked = marked.replacingOccurrences(of: pair.0, with: "\u{1}\(index)\u{2}") }
        for (index, pair) in pairs.enumerated() { marked = marked.replacingOccurrences(of: "\u{1}\(index)\u{2}", with: pair.1) }
        return marked
    }

    func shell(_ command: String) throws -> (status: Int32, stdout: String, stderr: String) {
        try SpawnedProcess.run("/bin/bash", ["-c", command], environment: environment, directory: directory.path)
    }

    static func withoutPassword(_ url: String) -> String {
        url.replacingOccurrences(of: #"://([^:@/]+):[^@/]*@"#, with: "://$1@", options: .regularExpression)
    }

    static func lines(_ text: String) -> [String] {
        guard !text.isEmpty else { return [] }
        return text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            .dropLast(text.hasSuffix("\n") ? 1 : 0)
    }
}

/// A session's command left running (`serve`, `--follow`): its output collected as it comes.
final class RunningCommand: Sendable {
    private let process: SpawnedProcess
    private let output = LockedValue("")
    private let condition = NSCondition()
    private let readers: [PipeReader]

    init(_ command: String, environment: [String: String], directory: String) throws {
        process = try SpawnedProcess(
            executable: "/bin/bash", arguments: ["-c", "exec " + command], environment: environment,
            directory: directory, error: .output)
        let (condition, output) = (condition, output)
        readers = [
            PipeReader(process.standardOutput!) { data in
                condition.lock()
                output.withLock { $0 += String(decoding: data, as: UTF8.self) }
                condition.broadcast()
                condition.unlock()
            }
        ]
    }

    /// The first `count` lines printed, waiting for them at most `timeout` seconds (fewer when it printed fewer).
    func waitForLines(_ count: Int, timeout: TimeInterval) -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while output.withLock({ $0.filter { $0 == "\n" }.count }) < count, condition.wait(until: deadline) {}
        return Array(DocSessionRun.lines(output.withLock { $0 }).prefix(count))
    }

    /// Interrupts it (as Ctrl-C does) and waits for its end, bounded; kills it if it does not end.
    func stop() {
        process.interrupt()
        if !process.waitUntilExit(timeout: 15) {
            process.send(SIGKILL)
            process.waitUntilExit()
        }
        for reader in readers { reader.waitForEnd(timeout: 15) }
    }
}
