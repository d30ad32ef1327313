import FeedSync
import FeedCore
import FeedDomain
import FeedSQLite
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// A child process whose stdout lines are collected as they arrive.
final class Child: Sendable {
    let process: SpawnedProcess
    let lines = LockedLog<String>()
    /// Its standard error, line by line, when it was started with `capturingErrors`.
    let errorLines = LockedLog<String>()
    private let readers: [PipeReader]

    /// Starts `executable` with `arguments`; `environment` entries are added to this process's environment. Its
    /// standard error goes to this process's, or with `capturingErrors` to ``errorLines``.
    init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], capturingErrors: Bool = false) throws {
        process = try SpawnedProcess(
            executable: executable, arguments: arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new },
            input: .pipe, error: capturingErrors ? .pipe : .inherit)
        readers = [(process.standardOutput, lines), (process.standardError, errorLines)].compactMap { handle, lines in
            handle.map { Self.lineReader($0, into: lines) }
        }
    }

    /// Reads `handle` to its end, appending each complete line to `lines`.
    private static func lineReader(_ handle: FileHandle, into lines: LockedLog<String>) -> PipeReader {
        let pending = LockedValue(Data())
        return PipeReader(handle) { chunk in
            pending.withLock { pending in
                pending.append(chunk)
                while let newline = pending.firstIndex(of: 0x0A) {
                    lines.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
        }
    }

    func send(_ line: String) {
        process.write(line + "\n")
    }

    func kill() {
        process.send(SIGKILL)
        process.waitUntilExit()
    }

    /// Waits until the process exited and its whole output was read (so `lines` is complete), at most `seconds`.
    func wait(seconds: Double = 60) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        return process.waitUntilExit(timeout: seconds)
            && readers.allSatisfy { $0.waitForEnd(timeout: max(0, deadline.timeIntervalSinceNow)) }
    }
}

/// The `feedsync-bench` executable built next to the test bundle (it holds the helper processes).
func benchExecutable() throws -> String {
    var directory = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
    for _ in 0..<4 {
        let candidate = directory.appendingPathComponent("feedsync-bench").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        directory.deleteLastPathComponent()
    }
    throw FeedError.storage(.cannotOpen(path: "feedsync-bench", reason: "not built next to the tests; run swift build first"))
}

// Blocks: waits for child processes and their output.
@Suite(.serialized, .ownThreads) struct CrossProcessTests {
    @Test func subscriberKilledMidStreamResumesWithNothingLostOrRepeated() throws {
        let bench = try benchExecutable()
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        let service = try FeedService(path: path)
        try service.seed(SeedPlan(posts: 50, users: 20, likes: 0))

        let writer = try Child(bench, ["agent-writer", "--db", path, "--rate", "400", "--count", "600", "--users", "20", "--posts", "50"])
        var subscriber = try Child(bench, ["agent-subscriber", "--db", path, "--name", "crashy"])
        // Kill the subscriber with SIGKILL once it has applied part of the stream, while the writer still writes.
        #expect(
            subscriber.lines.wait(seconds: 60) { lines in
                lines.contains { $0.hasPrefix("applied ") && Int64($0.dropFirst(8)) ?? 0 >= 100 }
            })
        subscriber.kill()
        let appliedBeforeKill = try service.store.read { db in try db.fetchInt64("SELECT count(*) FROM agent_applied") } ?? 0
        #expect(appliedBeforeKill > 0)
        #expect(writer.wait())
        #expect(writer.process.terminationStatus == 0)
        let last = try service.status().lastSeq
        #expect(last >= 600)

        // Restart: it resumes from its stored cursor and catches up to the end of the log.
        subscriber = try Child(bench, ["agent-subscriber", "--db", path, "--name", "crashy"])
        #expect(subscriber.lines.wait(seconds: 60) { $0.contains("applied \(last)") })
        subscriber.send("stop")
        #expect(subscriber.wait())

        let (applied, distinct, logSeqs) = try service.store.read { db in
            (
                try db.fetchAll("SELECT seq FROM agent_applied WHERE subscriber = 'crashy' ORDER BY seq") { $0.int64(at: 0) },
                try db.fetchInt64("SELECT count(DISTINCT seq) FROM agent_applied WHERE subscriber = 'crashy'") ?? 0,
                try EventLog(db).events(after: 0).map(\.seq)
            )
        }
        #expect(Int64(applied.count) == distinct, "an event was applied twice")
        #expect(applied == logSeqs, "the applied sequence differs from the log")
        #expect(try service.check().isEmpty)
    }

    @Test func likesFromAChildProcessReachThisProcessInOrder() throws {
        let bench = try benchExecutable()
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        let service = try FeedService(path: path)
        try service.seed(SeedPlan(posts: 50, users: 20, likes: 0))
        let changeFeed = ChangeFeed(service: service)
        try changeFeed.start()
        defer { changeFeed.stop() }
        let received = Recorder(service.bridge.changes)
        let writer = try Child(bench, ["agent-writer", "--db", path, "--rate", "500", "--count", "200", "--users", "20", "--posts", "50"])
        #expect(writer.wait())
        let acknowledged = writer.lines.values.compactMap { $0.split(separator: " ").first.flatMap { Int64($0) } }
        #expect(acknowledged.count == 200)
        #expect(received.wait { $0.last?.seq == acknowledged.last })
        #expect(received.values.map(\.seq) == acknowledged)
    }
}
