import FeedTestSupport
import Foundation
import Synchronization

/// A child process started in a process group of its own (`posix_spawn` with `POSIX_SPAWN_SETPGROUP`), so that
/// ``kill()`` also ends the helpers it starts: Chromium's zygote, renderer and utility processes.
final class ProcessGroup: Sendable {
    /// The child's pid, which is also the group's id.
    let pid: pid_t
    /// Whether the group was killed, and whether the child was reaped.
    private let state = Mutex((killed: false, reaped: false))

    /// Starts `executable` with stdin from `/dev/null`, stdout and stderr appended to `log`, and each of this
    /// process's descriptors in `descriptors` (child's number: ours) under the child's number; no other descriptor
    /// of this process.
    init(
        executable: String, arguments: [String], environment: [String: String], log: String,
        descriptors: [Int32: Int32] = [:]
    ) throws {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, log, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        for (child, parent) in descriptors { posix_spawn_file_actions_adddup2(&actions, parent, child) }
        // Nothing else of this process: a pipe or socket of another test open now would otherwise stay open in the
        // browser until it exits.
        spawnFileActionsAddCloseFrom(&actions, max(3, (descriptors.keys.max() ?? 2) + 1))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        guard status == 0 else { throw BrowserError("cannot start \(executable): \(String(cString: strerror(status)))") }
        self.pid = pid
    }

    deinit {
        kill()
    }

    /// Sends SIGKILL to the whole group (also when the child ended: its helpers may not have) and reaps the child.
    /// Safe to call twice.
    func kill() {
        state.withLock { state in
            if !state.killed { _ = Glibc.kill(-pid, SIGKILL) }
            state.killed = true
            var status: Int32 = 0
            while !state.reaped && waitpid(pid, &status, 0) == -1 && errno == EINTR {}
            state.reaped = true
        }
    }
}
