import FeedTestSupport
import Foundation

/// The outcome of one `feedsync` run.
struct CLIResult: Sendable {
    let status: Int32
    let stdout: String
    let stderr: String

    var lines: [String] {
        stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLast(stdout.hasSuffix("\n") ? 1 : 0)
    }
}

/// Runs the built `feedsync` binary, which SwiftPM puts next to the test bundle (`.build/<config>/feedsync`).
enum CLIRun {
    /// The binary's path.
    static let executable: String = {
        let directory = Bundle.main.bundleURL.deletingLastPathComponent()
        for candidate in [directory, Bundle.main.bundleURL] {
            let path = candidate.appendingPathComponent("feedsync").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        let fromArgv = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("feedsync").path
        return fromArgv
    }()

    /// A clean environment: no FEEDSYNC_* or NO_COLOR leaking in from the developer's shell, HOME set to `home`.
    static func environment(home: String, _ extra: [String: String] = [:]) -> [String: String] {
        var environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"]
        // Coverage builds: let the child write its profile where `swift test --enable-code-coverage` collects them.
        if let profile = ProcessInfo.processInfo.environment["LLVM_PROFILE_FILE"] { environment["LLVM_PROFILE_FILE"] = profile }
        environment.merge(extra) { $1 }
        return environment
    }

    /// Runs `feedsync arguments` to completion with `stdin` piped in.
    static func run(_ arguments: [String], environment: [String: String], stdin: String = "") throws -> CLIResult {
        let result = try SpawnedProcess.run(executable, arguments, environment: environment, input: stdin)
        return CLIResult(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }
}

/// A `feedsync` process left running (`events --follow`, `watch`, `app`), with stdout and stderr collected as
/// they come and stdin kept open.
final class RunningCLI: Sendable {
    private let process: SpawnedProcess
    private let collected = Collected()
    private let errorText = Collected()
    private let condition = NSCondition()
    private let readers: [PipeReader]
    private let arguments: [String]

    init(_ arguments: [String], environment: [String: String]) throws {
        self.arguments = arguments
        process = try SpawnedProcess(
            executable: CLIRun.executable, arguments: arguments, environment: environment, input: .pipe)
        let condition = condition
        readers = [(process.standardOutput!, collected), (process.standardError!, errorText)].map { handle, buffer in
            PipeReader(handle) { data in
                condition.lock()
                buffer.text += String(decoding: data, as: UTF8.self)
                condition.broadcast()
                condition.unlock()
            }
        }
    }

    deinit {
        if process.isRunning { process.terminate() }
    }

    /// Everything printed on stdout so far.
    var stdout: String {
        condition.lock()
        defer { condition.unlock() }
        return collected.text
    }

    /// Everything printed on stderr so far.
    var stderr: String {
        condition.lock()
        defer { condition.unlock() }
        return errorText.text
    }

    /// Waits until stdout contains `text`, at most `timeout` seconds (the suites' stall limit: a process started
    /// while the whole suite runs in parallel, instrumented, can take seconds to print); returns whether it appeared.
    /// When it did not, prints what the process printed so far, for the failure's log.
    func waitFor(_ text: String, timeout: TimeInterval = 30) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !collected.text.contains(text) {
            if !condition.wait(until: deadline) {
                if collected.text.contains(text) { return true }
                print(
                    "RunningCLI \(arguments): \"\(text)\" not printed within \(timeout) s (running: \(process.isRunning));"
                        + " stdout so far: \(collected.text.suffix(2000).debugDescription);"
                        + " stderr: \(errorText.text.suffix(2000).debugDescription)")
                return false
            }
        }
        return true
    }

    /// Writes a line to the process's stdin.
    func send(_ line: String) {
        process.write(line + "\n")
    }

    /// Sends SIGINT and waits for the exit status (bounded).
    func interrupt(timeout: TimeInterval = 10) -> Int32? {
        process.interrupt()
        return waitForExit(timeout: timeout)
    }

    /// Sends SIGKILL; returns whether the process was still running then (it died mid-work) and waits for its end.
    @discardableResult
    func kill() -> Bool {
        let running = process.isRunning
        if running { process.send(SIGKILL) }
        _ = waitForExit(timeout: 30)
        return running && process.wasSignaled
    }

    /// Waits for the process to end, at most `timeout` seconds, and for the rest of its output; `nil` when it did
    /// not end (it is then killed).
    func waitForExit(timeout: TimeInterval = 10) -> Int32? {
        if !process.waitUntilExit(timeout: timeout) {
            process.terminate()
            return nil
        }
        // The rest of the output: the readers may not have read it all yet.
        for reader in readers { reader.waitForEnd() }
        return process.terminationStatus
    }
}

/// Text collected from a pipe. `@unchecked Sendable`: `text` is only touched with `RunningCLI.condition` locked.
final class Collected: @unchecked Sendable {
    var text = ""
}
