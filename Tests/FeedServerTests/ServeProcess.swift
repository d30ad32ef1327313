import FeedTestSupport
import Foundation
import Synchronization

/// A `feedsync serve` child process on a database of its own, for tests that talk to it over HTTP.
///
/// It runs the `feedsync` binary SwiftPM builds next to the test bundle, with `HOME` in a temporary directory and a
/// clean environment, and waits (bounded) for the start line `feedsync: serving … on http://HOST:PORT/`, whose
/// URL it keeps. ``stop()`` (also run on release) sends SIGINT, then SIGKILL if the server does not end.
final class ServeProcess: Sendable {
    /// The server's base URL, ending in `/`.
    let url: String
    private let process: Process
    private let output: OutputCollector

    /// The binary's path (`.build/<config>/feedsync`).
    static let executable: String = {
        let directory = Bundle.main.bundleURL.deletingLastPathComponent()
        for candidate in [directory, Bundle.main.bundleURL] {
            let path = candidate.appendingPathComponent("feedsync").path
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("feedsync").path
    }()

    /// Starts `feedsync --db DATABASE serve --listen 127.0.0.1:PORT EXTRA…` with `HOME` set to `home`.
    ///
    /// Port 0 asks the server for a free port, which its start line reports.
    init(database: String, home: String, extra: [String] = [], port: UInt16 = 0, timeout: TimeInterval = 30) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.executable)
        process.arguments = ["--db", database, "serve", "--listen", "127.0.0.1:\(port)"] + extra
        var environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"]
        if let profile = ProcessInfo.processInfo.environment["LLVM_PROFILE_FILE"] { environment["LLVM_PROFILE_FILE"] = profile }
        process.environment = environment
        let collector = OutputCollector()
        output = collector
        let stdout = Pipe(), stderr = Pipe()
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = stdout
        process.standardError = stderr
        for pipe in [stdout, stderr] {
            pipe.fileHandleForReading.readabilityHandler = { handle in collector.append(handle.availableData) }
        }
        process.terminationHandler = { _ in collector.append(Data()) }
        try process.run()
        guard let url = collector.waitForURL(timeout: timeout, isRunning: { [process] in process.isRunning }) else {
            let text = collector.text
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            throw BrowserError("feedsync serve printed no start line within \(timeout) s: \(text)")
        }
        self.url = url
    }

    deinit {
        stop()
    }

    /// Starts a server on a free port: port 0 when the CLI takes it, else a port found free by binding to it.
    static func start(database: String, home: String, extra: [String] = []) throws -> ServeProcess {
        do {
            return try ServeProcess(database: database, home: home, extra: extra, port: 0)
        } catch {
            return try ServeProcess(database: database, home: home, extra: extra, port: try freePort())
        }
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed).
    static func freePort() throws -> UInt16 {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { throw BrowserError("socket: \(errno)") }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(socket, address, length) == 0 && getsockname(socket, address, &length) == 0
            }
        }
        guard bound else { throw BrowserError("bind: \(errno)") }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Everything the server printed so far (stdout and stderr together).
    var log: String { output.text }

    /// Sends SIGINT and waits (bounded) for the end; kills the server if it does not end. Safe to call twice.
    @discardableResult
    func stop(timeout: TimeInterval = 10) -> Int32? {
        guard process.isRunning else { return process.terminationStatus }
        process.interrupt()
        if output.waitForExit(timeout: timeout, isRunning: { [process] in process.isRunning }) {
            return process.terminationStatus
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        return nil
    }
}

/// The server's output as it arrives, with a condition to wait on.
private final class OutputCollector: Sendable {
    private let condition = NSCondition()
    private let buffer = Mutex("")

    var text: String { buffer.withLock { $0 } }

    /// Appends `data` and wakes the waiters (an empty `data` only wakes them: the process ended).
    func append(_ data: Data) {
        condition.lock()
        buffer.withLock { $0 += String(decoding: data, as: UTF8.self) }
        condition.broadcast()
        condition.unlock()
    }

    /// Waits for `… on http://HOST:PORT/` in the output; `nil` at the deadline or when the process ends first.
    func waitForURL(timeout: TimeInterval, isRunning: () -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while true {
            let text = buffer.withLock { $0 }
            if let match = text.firstMatch(of: /serving .* on (http:\/\/[0-9.:\[\]a-z]+\/)/) { return String(match.1) }
            if !isRunning() { return nil }
            // Bounded: the wait wakes at least every 100 ms, so a process that ended unseen is noticed.
            if Date() > deadline { return nil }
            _ = condition.wait(until: min(deadline, Date().addingTimeInterval(0.1)))
        }
    }

    /// Waits until `isRunning` turns false; returns whether it did within `timeout`.
    func waitForExit(timeout: TimeInterval, isRunning: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while isRunning() {
            if Date() > deadline { return false }
            _ = condition.wait(until: min(deadline, Date().addingTimeInterval(0.05)))
        }
        return true
    }
}
