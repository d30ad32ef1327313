import FeedTestSupport
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The built `feedsync` binary, run as a child process: SwiftPM puts it next to the test bundle.
final class ChildProcess: @unchecked Sendable {
    static let executable: String = {
        let directory = Bundle.main.bundleURL.deletingLastPathComponent()
        for candidate in [directory, Bundle.main.bundleURL] {
            let path = candidate.appendingPathComponent("feedsync").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("feedsync").path
    }()

    // `@unchecked Sendable`: `output`, `errors` and `readers` are touched only with `condition` locked (or in init).
    private let process: SpawnedProcess
    private let condition = NSCondition()
    private var output = ""
    private var errors = ""
    private var readers: [PipeReader] = []

    /// Starts `feedsync arguments` with a clean environment whose HOME is `home`.
    ///
    /// With `openFilesFirst` above 0, a shell opens `/dev/null` on the descriptors from 3 to that number and then
    /// becomes `feedsync`, which starts with them open, so the sockets it opens number above them, as in a busy
    /// process. The test process itself never holds that many files: every thread of a parallel run would get such
    /// numbers.
    init(_ arguments: [String], home: String, openFilesFirst: Int = 0) throws {
        var environment = ["PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"]
        if let profile = ProcessInfo.processInfo.environment["LLVM_PROFILE_FILE"] { environment["LLVM_PROFILE_FILE"] = profile }
        if openFilesFirst > 0 {
            let script = """
                [ "$(ulimit -n)" -ge \(openFilesFirst + 256) ] || ulimit -n \(openFilesFirst + 256) || exit 125
                exec 3</dev/null 4</dev/null 5</dev/null 6</dev/null 7</dev/null 8</dev/null 9</dev/null
                fd=0; while [ "$fd" -lt \(openFilesFirst) ]; do exec {fd}</dev/null || exit 125; done
                exec "$0" "$@"
                """
            process = try SpawnedProcess(
                executable: "/bin/bash", arguments: ["-c", script, Self.executable] + arguments, environment: environment)
        } else {
            process = try SpawnedProcess(executable: Self.executable, arguments: arguments, environment: environment)
        }
        readers = [(process.standardOutput!, true), (process.standardError!, false)].map { handle, isOutput in
            PipeReader(handle) { [condition] data in
                let text = String(decoding: data, as: UTF8.self)
                condition.lock()
                if isOutput { self.output += text } else { self.errors += text }
                condition.broadcast()
                condition.unlock()
            }
        }
    }

    deinit {
        if process.isRunning { process.terminate() }
    }

    var stdout: String {
        condition.lock()
        defer { condition.unlock() }
        return output
    }

    var stderr: String {
        condition.lock()
        defer { condition.unlock() }
        return errors
    }

    /// Waits until stdout holds a whole line, at most `timeout` seconds; returns the first line.
    func firstLine(timeout: Double = 30) -> String? {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while !output.contains("\n") {
            if !condition.wait(until: deadline) { return nil }
        }
        return output.components(separatedBy: "\n").first
    }

    /// The child's process id (for `/proc/PID/status`).
    var pid: Int32 { process.processIdentifier }

    /// Whether the child has not exited yet.
    var isRunning: Bool { process.isRunning }

    /// Sends `signal`.
    func send(_ signal: Int32) {
        process.send(signal)
    }

    /// Waits for the exit status, at most `timeout` seconds (`nil`: still running; it is killed).
    func waitForExit(timeout: Double = 30) -> Int32? {
        if !process.waitUntilExit(timeout: timeout) {
            process.terminate()
            return nil
        }
        // The rest of the output: the readers may not have read it all yet.
        for reader in readers { reader.waitForEnd() }
        return process.terminationStatus
    }

    /// Runs `feedsync arguments` to its end.
    static func run(_ arguments: [String], home: String) throws -> (status: Int32?, stdout: String, stderr: String) {
        let child = try ChildProcess(arguments, home: home)
        let status = child.waitForExit()
        return (status, child.stdout, child.stderr)
    }
}
