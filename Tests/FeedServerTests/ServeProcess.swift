import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `feedsync serve` as a child process (``ChildProcess``) on a free port, with the URL its start line reports.
///
/// ``stop()`` (also run on release, so a failing test stops it too) sends SIGINT and waits, bounded, for the end.
final class ServeProcess: Sendable {
    /// The server's base URL, ending in `/`.
    let url: String
    private let child: ChildProcess
    /// Set by the first ``stop()``: whether it ran, and the exit status it saw.
    private let stopped = Mutex<(done: Bool, status: Int32?)>((false, nil))

    /// Starts `feedsync --db DATABASE serve --listen 127.0.0.1:0 EXTRA…` with `HOME` set to `home` and waits (at
    /// most `timeout` seconds) for `feedsync: serving … on http://127.0.0.1:PORT/ (Ctrl-C to stop)`; with
    /// `openFilesFirst`, the server starts with that many files open (see ``ChildProcess``).
    init(database: String, home: String, extra: [String] = [], openFilesFirst: Int = 0, timeout: Double = 30) throws {
        child = try ChildProcess(
            ["--db", database, "serve", "--listen", "127.0.0.1:0"] + extra, home: home, openFilesFirst: openFilesFirst)
        guard let line = child.firstLine(timeout: timeout), let match = line.firstMatch(of: #/serving .* on (http:\S+/) /#)
        else {
            child.send(SIGKILL)
            _ = child.waitForExit(timeout: 10)
            throw ServeError(description: "feedsync serve printed no start line: \(child.stdout) \(child.stderr)")
        }
        url = String(match.1)
    }

    deinit {
        stop()
    }

    /// The server's port.
    var port: UInt16 { UInt16(url.split(separator: ":").last?.split(separator: "/").first ?? "") ?? 0 }

    /// The server's process id.
    var pid: Int32 { child.pid }

    /// Whether the process is still running (it has not exited or been reaped).
    var isAlive: Bool { child.isRunning }

    /// What the server printed so far, stdout then stderr.
    var log: String { child.stdout + child.stderr }

    /// Sends SIGINT and waits for the exit status (`nil`: it did not end within 30 s and was killed; a hang
    /// bound, wide because the first minute of a full parallel run on two cores slows every process). Safe to call
    /// twice.
    @discardableResult
    func stop() -> Int32? {
        stopped.withLock { stopped in
            if !stopped.done {
                child.send(SIGINT)
                stopped = (true, child.waitForExit(timeout: 30))
            }
            return stopped.status
        }
    }
}

/// The server did not start.
struct ServeError: Error, CustomStringConvertible {
    let description: String
}
