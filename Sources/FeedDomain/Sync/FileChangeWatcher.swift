internal import Foundation

/// Wakes a waiting thread when a file in a directory is modified (Linux inotify), or when told to stop.
///
/// Used by ``ChangeFeed`` to learn of commits by other processes at once: every WAL-mode commit writes the
/// database's `-wal` file. Where inotify is unavailable the watcher only times out, and the feed falls back to its
/// timer. Owned by one thread; not `Sendable` except for ``wake()``, which writes to a pipe.
///
/// Related documentation: <https://man7.org/linux/man-pages/man7/inotify.7.html>
final class FileChangeWatcher: @unchecked Sendable {
    // `@unchecked Sendable`: the descriptors are immutable after init; only `wake()` is called from other threads,
    // and it only writes one byte to the pipe (write(2) is thread-safe).
    private let inotify: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32

    /// Watches `directory` for modifications and creations of any file (filtering by name is not needed: a wake
    /// only triggers a cheap `PRAGMA data_version`).
    init(directory: String, enabled: Bool) {
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
            _ = fcntl(fds[1], F_SETFL, fcntl(fds[1], F_GETFL) | O_NONBLOCK)
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        var descriptor: Int32 = -1
        if enabled {
            descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            if descriptor >= 0, inotify_add_watch(descriptor, directory, UInt32(IN_MODIFY | IN_CREATE)) < 0 {
                close(descriptor)
                descriptor = -1
            }
        }
        inotify = descriptor
    }

    deinit {
        if inotify >= 0 { close(inotify) }
        if wakeRead >= 0 { close(wakeRead) }
        if wakeWrite >= 0 { close(wakeWrite) }
    }

    /// Whether file notifications work here.
    var isWatching: Bool { inotify >= 0 }

    /// Blocks until a file changes, ``wake()`` is called, or `timeout` passes; drains what woke it.
    func wait(timeout: Duration) {
        var descriptors = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        if inotify >= 0 { descriptors.append(pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)) }
        let milliseconds = Int32(clamping: timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
        let ready = poll(&descriptors, nfds_t(descriptors.count), max(milliseconds, 0))
        guard ready > 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        for descriptor in descriptors where descriptor.revents != 0 {
            while read(descriptor.fd, &buffer, buffer.count) > 0 {}
        }
    }

    /// Wakes a thread blocked in ``wait(timeout:)``.
    func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }
}
