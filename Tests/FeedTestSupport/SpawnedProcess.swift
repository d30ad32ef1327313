public import Foundation

/// A child process started with `posix_spawn(3)` and reaped by a thread of its own.
///
/// Tests start their children through this type, not Foundation's `Process`: on Linux, `Process.run` reads
/// `/proc/self/fd` into a fixed buffer (it crashed in a `memcpy` when a parallel run had many descriptors open), and
/// its exit notification goes through a shared run-loop thread (a full parallel run stalled with every launching
/// thread waiting behind one `run`). Here the child gets exactly its standard input, output and error: every pipe is
/// made close-on-exec and the child closes every descriptor from 3 up, so a pipe or socket another test opens at the
/// same moment never stays open in an unrelated child.
public final class SpawnedProcess: Sendable {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// `/dev/null`.
        case null
        /// A new pipe; this process holds the other end (``standardInput``, ``standardOutput``, ``standardError``).
        case pipe
        /// This process's own descriptor of the same number.
        case inherit
        /// The file at this path, opened for appending (created if missing). Not for standard input.
        case file(String)
        /// Standard error only: the same place as standard output.
        case output
    }

    /// The child's process id.
    public let processIdentifier: pid_t
    /// The write end of the child's standard input, when it is ``Stream/pipe``.
    public let standardInput: FileHandle?
    /// The read end of the child's standard output, when it is ``Stream/pipe``.
    public let standardOutput: FileHandle?
    /// The read end of the child's standard error, when it is ``Stream/pipe``.
    public let standardError: FileHandle?
    private let exit = ExitState()

    /// Starts `executable` (a path) with `arguments`, in `directory` if given, with `environment` (this process's
    /// own when `nil`); with `processGroup`, in a new process group whose id is its pid.
    public init(
        executable: String, arguments: [String] = [], environment: [String: String]? = nil, directory: String? = nil,
        input: Stream = .null, output: Stream = .pipe, error: Stream = .pipe, processGroup: Bool = false
    ) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var childEnds: [Int32] = []
        defer { for fd in childEnds { close(fd) } }
        var handles: [FileHandle?] = [nil, nil, nil]
        for (target, stream) in [(Int32(0), input), (1, output), (2, error)] {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .inherit:
                break
            case .file(let path):
                precondition(target != 0, "standard input cannot be a file opened for appending")
                posix_spawn_file_actions_addopen(&actions, target, path, O_WRONLY | O_CREAT | O_APPEND, 0o644)
            case .output:
                precondition(target == 2, "only standard error can go where standard output goes")
                posix_spawn_file_actions_adddup2(&actions, 1, 2)
            case .pipe:
                var fds: [Int32] = [-1, -1]
                guard openPipe(&fds, O_CLOEXEC) == 0 else { throw SpawnError("pipe2 failed: errno \(errno)") }
                let (ours, theirs) = target == 0 ? (fds[1], fds[0]) : (fds[0], fds[1])
                childEnds.append(theirs)
                handles[Int(target)] = FileHandle(fileDescriptor: ours, closeOnDealloc: true)
                // `dup2` clears close-on-exec on the child's copy.
                posix_spawn_file_actions_adddup2(&actions, theirs, target)
            }
        }
        if let directory { spawnFileActionsAddChdir(&actions, directory) }
        spawnFileActionsAddCloseFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // The child starts as from a shell: no signal blocked (a test harness's threads block most of them, and
        // a child inherits the spawning thread's mask: a blocked SIGXFSZ could not end a child past its file size
        // limit) and the usual ones at their default action.
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGINT, SIGTERM, SIGXFSZ, SIGHUP, SIGQUIT] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if processGroup {
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for pointer in argv + (envp ?? []) { free(pointer) } }
        var pid: pid_t = 0
        let spawned =
            envp.map { posix_spawn(&pid, executable, &actions, &attributes, argv, $0) }
            ?? posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        guard spawned == 0 else { throw SpawnError("cannot start \(executable): \(String(cString: strerror(spawned)))") }
        processIdentifier = pid
        (standardInput, standardOutput, standardError) = (handles[0], handles[1], handles[2])
        let exit = exit
        let child = pid
        let reaper = Thread {
            var status: Int32 = 0
            while waitpid(child, &status, 0) == -1 && errno == EINTR {}
            exit.status.withLock { $0 = status }
            exit.ended.signal()
        }
        reaper.name = "reaper \(pid)"
        reaper.start()
    }

    /// Runs `executable` to its end with standard input from `input` (then closed); returns its status (as
    /// ``terminationStatus``) and everything it printed. Both outputs are read at once, so neither fills up.
    public static func run(
        _ executable: String, _ arguments: [String] = [], environment: [String: String]? = nil,
        directory: String? = nil, input: String = ""
    ) throws -> (status: Int32, stdout: String, stderr: String) {
        let process = try SpawnedProcess(
            executable: executable, arguments: arguments, environment: environment, directory: directory,
            input: .pipe)
        let errors = LockedValue(Data())
        let reader = PipeReader(process.standardError!) { chunk in errors.withLock { $0.append(chunk) } }
        process.write(input)
        process.closeInput()
        let output = readAll(process.standardOutput!)
        reader.waitForEnd(timeout: 86_400)
        process.waitUntilExit()
        return (
            process.terminationStatus, String(decoding: output, as: UTF8.self),
            String(decoding: errors.withLock { $0 }, as: UTF8.self)
        )
    }

    /// Whether the child has not been reaped yet.
    public var isRunning: Bool { exit.status.withLock { $0 == nil } }

    /// Waits until the child exited.
    public func waitUntilExit() {
        exit.ended.wait()
        exit.ended.signal()  // later waits return at once
    }

    /// Waits until the child exited, at most `timeout` seconds; returns whether it did.
    public func waitUntilExit(timeout: Double) -> Bool {
        guard exit.ended.wait(timeout: .now() + timeout) == .success else { return false }
        exit.ended.signal()
        return true
    }

    /// The exit code, or the number of the signal that ended the child (see ``wasSignaled``). Only after it exited.
    public var terminationStatus: Int32 {
        let status = exit.status.withLock { $0 }
        guard let status else { preconditionFailure("the child is still running") }
        return status & 0x7f == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    /// Whether a signal ended the child. Only after it exited.
    public var wasSignaled: Bool {
        let status = exit.status.withLock { $0 }
        guard let status else { preconditionFailure("the child is still running") }
        return status & 0x7f != 0
    }

    /// Sends `signal` to the child (to its group with `group`).
    public func send(_ signal: Int32, group: Bool = false) {
        _ = kill(group ? -processIdentifier : processIdentifier, signal)
    }

    /// Sends SIGINT.
    public func interrupt() { send(SIGINT) }

    /// Sends SIGTERM.
    public func terminate() { send(SIGTERM) }

    /// Writes `text` to the child's standard input.
    public func write(_ text: String) {
        standardInput?.write(Data(text.utf8))
    }

    /// Closes this process's end of the child's standard input: the child reads an end of file.
    public func closeInput() {
        try? standardInput?.close()
    }
}

/// The child's wait status once reaped, and a semaphore signalled then.
private final class ExitState: Sendable {
    let status = LockedValue<Int32?>(nil)
    let ended = DispatchSemaphore(value: 0)
}

/// A child could not be started.
public struct SpawnError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// `pipe2(2)`, which Glibc's Swift module does not declare.
@_silgen_name("pipe2")
private func openPipe(_ fds: UnsafeMutablePointer<Int32>, _ flags: Int32) -> Int32

/// `posix_spawn_file_actions_addchdir_np(3)` (glibc 2.29): the child changes to `path` before it runs.
@discardableResult
@_silgen_name("posix_spawn_file_actions_addchdir_np")
private func spawnFileActionsAddChdir(
    _ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ path: UnsafePointer<CChar>
) -> Int32

/// `posix_spawn_file_actions_addclosefrom_np(3)` (glibc 2.34): the child closes every descriptor from `lowest` up.
/// Glibc's Swift module does not declare it (it is a GNU extension), so it is bound by its symbol name.
@discardableResult
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
public func spawnFileActionsAddCloseFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ lowest: Int32) -> Int32
