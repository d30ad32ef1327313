import Foundation
import Synchronization

/// What one W9 thread (an HTTP client, or a caller of the in-process peer) reports after its ops.
struct OpReport: Sendable {
    /// Each op's latency, ns, in op order.
    var latencies: [UInt64] = []
    /// The seq each op's answer carried.
    var seqs: [Int64] = []
    /// The posts (numbers) the thread's user likes at the end, as it tracked them.
    var liked: Set<Int> = []
    var unlikes = 0
    var failures: [String] = []
}

/// T OS threads behind a start barrier, each running `body(index)` once; the span runs from the first thread leaving
/// the barrier to the last one finishing (W7's timing).
enum BarrierThreads {
    private struct Tally {
        var waiting: Int
        var running: Int
        var firstStart: UInt64 = .max
        var lastFinish: UInt64 = 0
        var reports: [Int: OpReport] = [:]
    }

    /// Runs the threads and returns the span, when the last thread finished (`monotonicNanos()`), and the reports
    /// in thread order.
    static func run(
        threads: Int, name: String, _ body: @escaping @Sendable (Int) -> OpReport
    ) -> (seconds: Double, lastFinish: UInt64, reports: [OpReport]) {
        let tally = Mutex(Tally(waiting: threads, running: threads))
        let condition = NSCondition()
        for index in 0..<threads {
            let thread = Thread {
                condition.lock()
                let left = tally.withLock { tally in
                    tally.waiting -= 1
                    return tally.waiting
                }
                if left == 0 {
                    condition.broadcast()
                } else {
                    while tally.withLock({ $0.waiting }) > 0 { condition.wait() }
                }
                condition.unlock()
                let started = monotonicNanos()
                let report = body(index)
                let finished = monotonicNanos()
                condition.lock()
                tally.withLock { tally in
                    tally.firstStart = min(tally.firstStart, started)
                    tally.lastFinish = max(tally.lastFinish, finished)
                    tally.reports[index] = report
                    tally.running -= 1
                }
                condition.broadcast()
                condition.unlock()
            }
            thread.name = "\(name)-\(index)"
            thread.start()
        }
        condition.lock()
        while tally.withLock({ $0.running }) > 0 { condition.wait() }
        condition.unlock()
        return tally.withLock { tally in
            (Double(tally.lastFinish &- tally.firstStart) / 1e9, tally.lastFinish, (0..<threads).map { tally.reports[$0] ?? OpReport() })
        }
    }
}

/// The real `feedsync serve` as a child process: the `feedsync` executable beside this one, listening on a free
/// loopback port, started and waited for until it prints its start line.
final class ServeChild {
    let process = Process()
    /// The port from the start line.
    let port: UInt16
    private var stopped = false
    /// Signalled when the process has exited.
    private let exited: DispatchSemaphore

    /// `feedsync --db LOCATION serve --listen 127.0.0.1:0 SERVE-ARGUMENTS…`; a PostgreSQL password goes in `PGPASSWORD`,
    /// not on the command line.
    init(location: String, password: String?, serveArguments: [String] = []) throws {
        let bench = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        let executable = URL(fileURLWithPath: bench).deletingLastPathComponent().appendingPathComponent("feedsync").path
        guard FileManager.default.isExecutableFile(atPath: executable) else {
            throw BenchError("w9 needs \(executable): swift build -c release --product feedsync-bench --product feedsync")
        }
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--db", location, "serve", "--listen", "127.0.0.1:0"] + serveArguments
        let exited = DispatchSemaphore(value: 0)
        self.exited = exited
        process.terminationHandler = { _ in exited.signal() }
        if let password {
            var environment = ProcessInfo.processInfo.environment
            environment["PGPASSWORD"] = password
            process.environment = environment
        }
        let pipe = Pipe()
        process.standardOutput = pipe
        let found = Mutex<UInt16?>(nil)
        let started = DispatchSemaphore(value: 0)
        let handle = pipe.fileHandleForReading
        // Reads the start line (`feedsync: serving … on http://127.0.0.1:PORT/ (Ctrl-C to stop)`), then drains.
        let reader = Thread {
            var pending = Data()
            var signalled = false
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending.append(chunk)
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    guard !signalled, let range = line.range(of: "http://127.0.0.1:") else { continue }
                    found.withLock { $0 = UInt16(line[range.upperBound...].prefix { $0.isNumber }) }
                    signalled = true
                    started.signal()
                }
            }
            if !signalled { started.signal() }
        }
        try process.run()
        reader.start()
        guard started.wait(timeout: .now() + 60) == .success, let port = found.withLock({ $0 }) else {
            process.terminate()
            throw BenchError("feedsync serve did not print its start line")
        }
        self.port = port
    }

    deinit {
        if !stopped, process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// `VmRSS` and `VmHWM` (peak) of the server from `/proc/PID/status`, MiB.
    func memoryMegabytes() -> (rss: Double, peak: Double) {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Double {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return .nan }
            let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Double($0) } ?? .nan
            return kilobytes / 1024
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    /// The server's user plus system CPU so far, seconds (`/proc/PID/stat` fields 14 and 15).
    func cpuSeconds() -> Double {
        let stat = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8)) ?? ""
        guard let close = stat.lastIndex(of: ")") else { return .nan }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return .nan }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Sends SIGTERM and waits for the exit; returns the exit status (-1 when a signal ended it).
    func stop() -> Int32 {
        stopped = true
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        return process.terminationReason == .exit ? process.terminationStatus : -1
    }

    /// Sends SIGTERM and waits at most `timeout` seconds for the exit; returns the exit status (-1 when a signal ended
    /// it), or `nil` when the server was still running then (it is killed).
    func stop(within timeout: Double) -> Int32? {
        stopped = true
        kill(process.processIdentifier, SIGTERM)
        guard exited.wait(timeout: .now() + timeout) == .success else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            return nil
        }
        process.waitUntilExit()  // it has exited: this only lets Process record the status
        return process.terminationReason == .exit ? process.terminationStatus : -1
    }
}
