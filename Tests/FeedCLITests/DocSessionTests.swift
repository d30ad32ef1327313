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
            substitutions.append((DocSession.postgresExample, database.url))
            printedSubstitutions.append((Self.withoutPassword(database.url), DocSession.postgresExample))
        }
        for step in session.steps {
            let command = substituted(step.command)
            if let (name, value) = step.export {
                environment[name] = try shell(#"printf %s "\#(substituted(value))""#).stdout
                continue
            }
            if step.runsUntilInterrupted {
                let process = try RunningCommand(command, environment: environment, directory: directory.path)
                running.append(process)
                let shown = step.expected.map(substituted)
                let printed = process.waitForLines(shown.count, timeout: 30).map(printedAsShown)
                compare(printed, shown, step: step, elided: true)
                continue
            }
            let result = try shell(command)
            let printed = (Self.lines(result.stdout) + Self.lines(result.stderr)).map(printedAsShown)
            #expect(result.status == step.status, "\(file) \(step): exit status \(result.status)\n\(result.stderr)")
            compare(printed, step.expected.map(substituted), step: step, elided: step.elided)
        }
    }

    func compare(_ printed: [String], _ shown: [String], step: DocSession.Step, elided: Bool) {
        let compared = elided ? Array(printed.prefix(shown.count)) : printed
        let same = compared.count == shown.count && zip(compared, shown).allSatisfy { DocSession.matches($0, $1) }
        #expect(same, "\(file) \(step) printed:\n\(compared.joined(separator: "\n"))\nshown:\n\(shown.joined(separator: "\n"))")
    }

    func substituted(_ text: String) -> String {
        substitutions.reduce(text) { $0.replacingOccurrences(of: $1.shown, with: $1.real) }
    }

    /// A printed line in the documents' terms: the real directory and port back to the shown ones.
    func printedAsShown(_ line: String) -> String {
        let line = printedSubstitutions.reduce(line) { $0.replacingOccurrences(of: $1.printed, with: $1.shown) }
        return substitutions.reversed().reduce(line) { $0.replacingOccurrences(of: $1.real, with: $1.shown) }
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
