import FeedSync
import FeedCore
import FeedDomain
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// The server-restart fault test and the process helpers it and ``NetworkFaultTests`` use.
extension PostgresFaultTests {
    // MARK: - 3. Server restart under load

    /// The server is crash-stopped (`pg_ctl stop -m immediate`), left down for 3 s and started again while a writer
    /// process, writer threads in this process, a ``ChangeFeed`` and a transactional ``DurableSubscriber`` run.
    /// Commands in flight fail with a typed busy error (`connectionLost`), the CLI prints one line and exits 74 or 75,
    /// and then everything resumes by itself: every acknowledged change is in the tables and the log, and the bridge
    /// and the subscriber each see every seq exactly once, in order.
    ///
    /// The restarted server is a private one, started with `.ci/postgres-server.sh` next to the shared test server
    /// (in the parent of `FEEDSYNC_TEST_POSTGRES_DIR`), so that suites running in parallel on the shared server never
    /// see the restart. Without the variable the test skips with a notice; with `CI=true` it fails.
    @Test func serverRestartedUnderLoadFailsCommandsInFlightWithATypedErrorAndEverythingResumesByItself() throws {
        guard let serverParent = try Self.restartableServerParent() else { return }
        let bench = try benchExecutable()
        let cli = URL(fileURLWithPath: bench).deletingLastPathComponent().appendingPathComponent("feedsync").path
        let serverDir = serverParent + "/restart-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let url = try Self.script(["start", serverDir], timeout: 60)
        defer { _ = try? Self.script(["stop", serverDir], timeout: 60) }
        let password = URLComponents(string: url)?.password ?? url
        let shown = FeedLocation.redacted(url)

        let service = try FeedService(location: url)
        try service.seed(SeedPlan(posts: 50, users: 20, likes: 0))
        try service.executeSQL("CREATE TABLE fault_applied (n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, seq BIGINT NOT NULL)")
        let baseline = try service.status().lastSeq
        let received = Recorder(service.bridge.changes)
        let changeFeed = ChangeFeed(service: service)
        let feedErrors = Recorder(changeFeed.errors)
        try changeFeed.start()
        defer { changeFeed.stop() }
        let subscriber = DurableSubscriber(
            name: "restart", service: service, batchSize: 20,
            delivery: .transactional { event, tx in
                try tx.execute("INSERT INTO fault_applied (seq) VALUES ($1)", [.integer(event.seq)])
            })
        let signals = Recorder(subscriber.signals)
        try subscriber.start()
        defer { subscriber.stop() }
        let child = try Child(bench, ["agent-acks", "--db", url, "--seed", "7", "--users", "1-10", "--rate", "150"])
        let started = ContinuousClock.now

        let phase = Box(RestartPhase.before)
        let threadAcks = LockedLog<Ack>()
        let threadErrors = LockedLog<(phase: RestartPhase, error: FeedError)>()
        let cliRuns = LockedLog<CLIRun>()
        let restartTime = LockedLog<Duration>()
        let problems = LockedLog<String>()
        // A CLI command caught by the restart may wait up to libpq's connect timeout (10 s) for each connection attempt:
        // 20 s ran out once in CI (one `feedsync like` 21 s in its step; cause not pinned down). 60 s still fails a hang.
        let watchdog = Watchdog(stallTimeout: .seconds(60), limit: .seconds(180))
        for t in 1...2 {
            watchdog.spawn("writer-\(t)") { worker in
                var random = FaultRandom(seed: UInt64(70 + t))
                var afterRestart = 0
                var n = 0
                while afterRestart < 30 {
                    n += 1
                    let current = phase.withLock { $0 }
                    let user = "user\(11 + 4 * (t - 1) + random.next(4))"
                    let post = "post\(1 + random.next(50))"
                    worker.step("toggle(\(user), \(post)) #\(n), \(current)")
                    do {
                        let result = try service.toggle(userID: user, postID: post)
                        if let seq = result.seq, let ack = Ack("ack \(seq) \(result.liked ? "liked" : "unliked") \(user) \(post)", slot: 0)
                        {
                            threadAcks.append(ack)
                        }
                        if current == .after { afterRestart += 1 }
                    } catch {
                        threadErrors.append((current, FeedError.wrap(error)))
                    }
                    usleep(4000)  // pacing: about 200 commands a second per thread
                }
            }
        }
        watchdog.spawn("restart") { worker in
            worker.step("waiting for 30 acknowledged commands from agent-acks and the writer threads")
            let loaded =
                child.lines.wait(seconds: 20) { $0.count >= 30 } && threadAcks.wait(seconds: 20) { $0.count >= 30 }
            if !loaded {
                problems.append(
                    "no load before the restart: \(child.lines.values.count) child lines, \(threadAcks.values.count) thread acks")
            }
            phase.withLock { $0 = .restarting }
            // Down for 3 s between the immediate stop and the start: CLI runs take up to a second each on a loaded
            // machine, and one must start while the server is down.
            worker.step("postgres-server.sh restart (pg_ctl stop -m immediate, 3 s down, start)")
            let begin = ContinuousClock.now
            do {
                _ = try Self.script(["restart", serverDir, "3"], timeout: 60)
            } catch {
                problems.append("restart: \(error)")
            }
            restartTime.append(ContinuousClock.now - begin)
            phase.withLock { $0 = .after }
        }
        watchdog.spawn("cli") { worker in
            var n = 0
            while true {
                let current = phase.withLock { $0 }
                if current == .after { break }
                if current == .before {
                    worker.step("waiting for the restart to begin")
                    usleep(5000)
                    continue
                }
                n += 1
                worker.step("feedsync like post\(1 + n % 50) --user user20 #\(n) during the restart")
                cliRuns.append(Self.runCLI(cli, ["--db", url, "like", "post\(1 + n % 50)", "--user", "user20", "--json"]))
            }
        }
        watchdog.spawn("agent-acks") { worker in
            var seen = -1
            var linesAtRestart: Int?
            while true {
                let lines = child.lines.values
                if lines.count != seen {
                    seen = lines.count
                    worker.step("agent-acks: \(lines.count) lines, last \(lines.last ?? "none")")
                }
                if phase.withLock({ $0 }) == .after, linesAtRestart == nil { linesAtRestart = lines.count }
                if let mark = linesAtRestart, lines.count >= mark + 30 { break }
                if !child.process.isRunning {
                    problems.append("agent-acks exited with status \(child.process.terminationStatus)")
                    return
                }
                _ = child.lines.wait(seconds: 0.5) { $0.count > lines.count }
            }
            worker.step("SIGKILL agent-acks")
            child.kill()
            _ = child.wait(seconds: 10)
        }
        if case .stalled(let report) = watchdog.waitForWorkers() {
            child.kill()
            Watchdog.abandon([service, changeFeed, subscriber, received, signals, feedErrors])
            Issue.record(Comment(rawValue: report))
            return
        }
        #expect(problems.values == [])

        // Recovery: the feed and the subscriber must catch up by themselves (no restart, no manual catch-up).
        let last = try service.status().lastSeq
        let feedCaughtUp = received.wait(seconds: 20) { $0.contains { $0.seq == last } }
        let subscriberCaughtUp = signals.wait(seconds: 20) {
            $0.contains { if case .caughtUp(let seq) = $0 { seq >= last } else { false } }
        }
        #expect(
            feedCaughtUp, "the bridge never received seq \(last) after the restart (feed errors: \(feedErrors.values.map(\.description)))")
        #expect(subscriberCaughtUp, "the subscriber never caught up to seq \(last) (signals: \(signals.values.suffix(5)))")
        let seconds = Watchdog.format(ContinuousClock.now - started)

        let log = try service.events(after: baseline)
        let logSeqs = log.map(\.seq)
        #expect(ConcurrencyStressTests.logProblems(delivered: received.values.map(\.seq), log: logSeqs) == [], "bridge")
        let applied = try service.firstColumn("SELECT seq FROM fault_applied ORDER BY n").compactMap { value -> Int64? in
            if case .integer(let seq) = value { seq } else { nil }
        }
        #expect(ConcurrencyStressTests.logProblems(delivered: applied, log: logSeqs) == [], "subscriber")

        // Every failure was a typed busy error (the connection was lost), and some commands were in flight.
        let errors = threadErrors.values
        #expect(!errors.isEmpty, "no command in this process failed during the restart")
        let untyped = errors.filter { $0.error.category != .busy }.map { "\($0.phase): \($0.error)" }
        #expect(untyped == [], "commands failed with other than a busy error")
        #expect(errors.allSatisfy { $0.phase != .before }, "commands failed before the restart: \(errors.prefix(3).map(\.error))")
        let childLines = child.lines.values
        let childErrors = childLines.filter { $0.hasPrefix("error") }
        #expect(childErrors.allSatisfy { $0.hasPrefix("error busy ") }, "agent-acks failures: \(Set(childErrors))")
        let cliFailures = cliRuns.values.filter { $0.status != 0 }
        #expect(!cliFailures.isEmpty, "no CLI run fell into the outage (\(cliRuns.values.count) runs)")
        for run in cliFailures {
            #expect(
                [74, 75].contains(run.status) && run.lines.count == 1,
                "feedsync like during the outage: status \(run.status), \(run.lines.count) lines: \(run.lines.prefix(3))")
            #expect(!run.lines.contains { $0.contains(password) }, "the CLI printed the password")
        }
        let cliAcks = cliRuns.values.compactMap(\.ack)
        let acks = childLines.compactMap { Ack($0, slot: 1) } + threadAcks.values + cliAcks
        #expect(Self.ackProblems(acks, log: log, service: service) == [])
        #expect(try service.check().map(\.description) == [])
        try expectReplayMatchesLikes(service, try service.events(after: 0))
        let errorCases = Dictionary(errors.map { (FeedErrorCase($0.error).name, 1) }, uniquingKeysWith: +)
        print(
            "PostgresFaultTests: server restart (\(restartTime.values.first.map(Watchdog.format) ?? "?")) under load on \(shown): "
                + "\(acks.count) acknowledged changes, in-process failures \(errorCases), agent-acks failures \(childErrors.count), "
                + "CLI runs during the restart \(cliRuns.values.count) (\(cliFailures.count) failed with "
                + "\(Set(cliFailures.map(\.status)).sorted())); everything caught up \(seconds) after the load began")
    }

    enum RestartPhase: Sendable, CustomStringConvertible {
        case before, restarting, after
        var description: String {
            switch self {
            case .before: "before the restart"
            case .restarting: "during the restart"
            case .after: "after the restart"
            }
        }
    }

    /// One `feedsync` run: exit status, every line of stdout and stderr, and its acknowledged change if any.
    struct CLIRun: Sendable {
        let status: Int32
        let lines: [String]
        var ack: Ack? {
            guard status == 0, let line = lines.first, let data = line.data(using: .utf8),
                let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let seq = json["seq"] as? Int, let liked = json["liked"] as? Bool,
                let user = json["userID"] as? String, let post = json["postID"] as? String
            else { return nil }
            return Ack("ack \(seq) \(liked ? "liked" : "unliked") \(user) \(post)", slot: 2)
        }
    }

    /// A FeedError's case name, for the summary line.
    struct FeedErrorCase {
        let name: String
        init(_ error: FeedError) {
            if case .storage(let storage) = error {
                name = Mirror(reflecting: storage).children.first?.label ?? "storage"
            } else {
                name = Mirror(reflecting: error).children.first?.label ?? "\(error)"
            }
        }
    }

    /// Runs `feedsync` with `arguments` (at most 30 s), collecting the lines of stdout and stderr together.
    static func runCLI(_ executable: String, _ arguments: [String]) -> CLIRun {
        do {
            let (status, output) = try spawn(executable, arguments, mergeStandardError: true, timeout: 30)
            return CLIRun(status: status, lines: output.split(separator: "\n").map(String.init))
        } catch {
            return CLIRun(status: -1, lines: ["feedsync: \(error)"])
        }
    }

    /// Runs `executable` (stdin `/dev/null`, stdout — and with `mergeStandardError` stderr — into a pipe, else
    /// stderr to the test's) and waits at most `timeout` seconds for its output to end and for it to exit (then it
    /// is killed). `posix_spawn` and `waitpid` rather than `Process`: `Process.waitUntilExit()` can hang for ever on
    /// a script that started a daemon (the shell stays a zombie).
    static func spawn(
        _ executable: String, _ arguments: [String], mergeStandardError: Bool, timeout: Double
    ) throws -> (status: Int32, output: String) {
        var fds: [Int32] = [0, 0]
        // Close-on-exec from the start (a socket pair, since Swift's Glibc has no `pipe2`): other threads of this test
        // spawn processes at the same time (the server's restart starts a postmaster that lives on); one that
        // inherited the write end would keep it open, and the read below would wait for an end of output that never
        // comes (a CLI run "did not finish in 30 s" in CI that way). The child gets the write end through `adddup2`,
        // which clears the flag on its copy.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
            throw SpawnError("socketpair failed: errno \(errno)")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        if mergeStandardError { posix_spawn_file_actions_adddup2(&actions, fds[1], 2) }
        // And nothing else of this process (a postmaster started here lives on, and would hold other tests' pipes).
        spawnFileActionsAddCloseFrom(&actions, 3)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(fds[1])
        guard spawned == 0 else {
            close(fds[0])
            throw SpawnError("posix_spawn \(executable) failed: \(spawned)")
        }
        let result = Box<(status: Int32, output: Data)>((-1, Data()))
        let ended = DispatchSemaphore(value: 0)
        let reader = fds[0]
        let child = pid
        Thread {
            var data = Data()
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = read(reader, &buffer, buffer.count)
                if count > 0 {
                    data.append(contentsOf: buffer[0..<count])
                } else if count < 0 && errno == EINTR {
                    continue
                } else {
                    break
                }
            }
            close(reader)
            var status: Int32 = 0
            while waitpid(child, &status, 0) < 0 && errno == EINTR {}
            let code = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            result.withLock { $0 = (code, data) }
            ended.signal()
        }.start()
        guard ended.wait(timeout: .now() + timeout) == .success else {
            kill(pid, SIGKILL)
            throw SpawnError(
                "\(URL(fileURLWithPath: executable).lastPathComponent) \(arguments.first ?? "") did not finish in \(Int(timeout)) s")
        }
        let (status, data) = result.withLock { $0 }
        return (status, String(decoding: data, as: UTF8.self))
    }

    struct SpawnError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Where the restart test may start its own server: the parent of `FEEDSYNC_TEST_POSTGRES_DIR`. `nil` (after a
    /// notice) when the variable is unset; throws on CI, where the test must run.
    static func restartableServerParent() throws -> String? {
        let variable = "FEEDSYNC_TEST_POSTGRES_DIR"
        guard let dir = ProcessInfo.processInfo.environment[variable], !dir.isEmpty else {
            if ProcessInfo.processInfo.environment["CI"] == "true" {
                throw FeedError.storage(.cannotOpen(path: variable, reason: "unset on CI: the server-restart test cannot be skipped there"))
            }
            FileHandle.standardError.write(
                Data(
                    "PostgresFaultTests: server-restart test skipped: set \(variable) to a server directory of .ci/postgres-server.sh.\n"
                        .utf8))
            return nil
        }
        return URL(fileURLWithPath: dir).deletingLastPathComponent().path
    }

    /// Runs `.ci/postgres-server.sh ARGS` (at most `timeout` seconds); returns its stdout without the newline. Its
    /// stderr (which never holds the password) goes to the test's.
    @discardableResult
    static func script(_ arguments: [String], timeout: Double) throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let path = root.appendingPathComponent(".ci/postgres-server.sh").path
        let (status, output) = try spawn("/bin/bash", [path] + arguments, mergeStandardError: false, timeout: timeout)
        guard status == 0 else { throw SpawnError("postgres-server.sh \(arguments.first ?? "") failed with exit status \(status)") }
        return output.trimmingCharacters(in: .newlines)
    }
}
