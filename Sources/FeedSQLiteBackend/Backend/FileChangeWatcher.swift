internal import Foundation

/// Wakes a waiting thread when one of a database's files changes in its directory (Linux inotify), or when told
/// to stop.
///
/// Used by ``ChangeFeed`` to learn of commits by other processes at once: every WAL-mode commit writes the
/// database's `-wal` file, and deleting, creating or renaming the database file itself is reported too (so a
/// replaced file is noticed at once). Events for other files of the directory (including `-shm`, which SQLite
/// changes through `mmap` and so never raises an event anyway) are read and ignored. Where inotify is unavailable
/// the watcher only times out, and the feed falls back to its timer. Owned by one thread; not `Sendable` except
/// for ``wake()``, which writes to a pipe.
///
/// Related documentation: <https://man7.org/linux/man-pages/man7/inotify.7.html>
final class FileChangeWatcher: @unchecked Sendable {
    // `@unchecked Sendable`: the descriptors and names are immutable after init; only `wake()` is called from
    // other threads, and it only writes one byte to the pipe (write(2) is thread-safe). No lock is involved.
    private let inotify: Int32
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// The file names (within the directory) whose events count: the database, `-wal` and `-journal`.
    private let names: Set<[UInt8]>

    /// Why ``wait(timeout:)`` returned.
    enum Wake: Equatable {
        /// One of the watched files was modified, created, deleted or renamed (or inotify lost events).
        case fileChanged
        /// ``wake()`` was called.
        case woken
        /// The timeout passed.
        case timedOut
    }

    /// Watches `databasePath`'s directory for modifications, creations, deletions and renames of the database's
    /// files.
    init(databasePath: String, enabled: Bool) {
        var fds: [Int32] = [-1, -1]
        if pipe(&fds) == 0 {
            for fd in fds {
                _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
                _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            }
        }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        let directory = (databasePath as NSString).deletingLastPathComponent
        let base = (databasePath as NSString).lastPathComponent
        names = Set([base, base + "-wal", base + "-journal"].map { Array($0.utf8) })
        var descriptor: Int32 = -1
        if enabled {
            descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
            let mask = IN_MODIFY | IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF
            if descriptor >= 0, inotify_add_watch(descriptor, directory.isEmpty ? "." : directory, UInt32(mask)) < 0 {
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

    /// Blocks until a watched file changes, ``wake()`` is called, or `timeout` passes; drains what woke it.
    ///
    /// Timeouts under a millisecond (`poll(2)` counts whole milliseconds) sleep first and then look without
    /// blocking, so a wake-up during such a short sleep is seen when it ends.
    func wait(timeout: Duration) -> Wake {
        let deadline = ContinuousClock.now + timeout
        var descriptors = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
        if inotify >= 0 { descriptors.append(pollfd(fd: inotify, events: Int16(POLLIN), revents: 0)) }
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            var milliseconds: Int32 = 0
            if remaining >= .milliseconds(1) {
                let (seconds, attoseconds) = remaining.components
                milliseconds = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)
            } else if remaining > .zero {
                var pause = timespec(tv_sec: 0, tv_nsec: Int(remaining.components.attoseconds / 1_000_000_000))
                _ = nanosleep(&pause, nil)
            }
            for index in descriptors.indices { descriptors[index].revents = 0 }
            let ready = poll(&descriptors, nfds_t(descriptors.count), milliseconds)
            if ready > 0 {
                if descriptors[0].revents != 0 {
                    drainPipe()
                    if descriptors.count > 1, descriptors[1].revents != 0 { _ = drainEvents() }
                    return .woken
                }
                if drainEvents() { return .fileChanged }
            }
            if ContinuousClock.now >= deadline { return .timedOut }
            // Only events for other files, or an interrupted poll: wait out the rest of the timeout.
        }
    }

    /// Wakes a thread blocked in ``wait(timeout:)``.
    func wake() {
        var byte: UInt8 = 1
        _ = write(wakeWrite, &byte, 1)
    }

    private func drainPipe() {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(wakeRead, &buffer, buffer.count) > 0 {}
    }

    /// Reads every pending inotify event; returns whether one concerns the database's files, the directory itself,
    /// or was lost (queue overflow).
    private func drainEvents() -> Bool {
        var relevant = false
        // Room for many events: each is a 16-byte header plus a name padded to at most NAME_MAX + 1.
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = read(inotify, &buffer, buffer.count)
            guard count > 0 else { break }
            buffer.withUnsafeBytes { bytes in
                var offset = 0
                let headerSize = 16  // int wd; uint32_t mask, cookie, len
                while offset + headerSize <= count {
                    let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let nameStart = offset + headerSize
                    if mask & UInt32(IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED) != 0 {
                        relevant = true
                    } else if length > 0, nameStart + length <= count {
                        let field = bytes[nameStart..<(nameStart + length)]
                        let name = Array(field.prefix { $0 != 0 })
                        if names.contains(name) { relevant = true }
                    }
                    offset = nameStart + length
                }
            }
        }
        return relevant
    }
}
