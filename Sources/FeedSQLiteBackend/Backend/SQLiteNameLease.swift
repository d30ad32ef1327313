package import FeedCore
internal import Foundation
internal import Glibc
internal import Synchronization

extension FeedStore {
    /// Holds `name` with an exclusive, non-blocking `flock(2)` on `<database>-lease-<hex of name>`: one open file
    /// description at a time, so two stores in one process exclude each other as two processes do. The lock file
    /// stays (empty) after release. In memory: a process-local set of names.
    ///
    /// Related documentation: <https://man7.org/linux/man-pages/man2/flock.2.html>
    package func tryHold(name: String) throws -> (any FeedNameLease)? {
        guard let path else {
            return InMemoryNameLease.tryHold(name, database: ObjectIdentifier(self))
        }
        let hex = name.utf8.map { String(format: "%02x", $0) }.joined()
        let lockPath = path + "-lease-" + hex
        let descriptor = open(lockPath, O_CREAT | O_RDWR | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StorageError.cannotOpen(path: lockPath, reason: String(cString: strerror(errno)))
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let failure = errno
            Glibc.close(descriptor)
            if failure == EWOULDBLOCK { return nil }
            throw StorageError.cannotOpen(path: lockPath, reason: String(cString: strerror(failure)))
        }
        return FileNameLease(descriptor: descriptor)
    }
}

/// A name held by an open, `flock`ed file; closing the descriptor releases it.
private final class FileNameLease: FeedNameLease {
    /// The descriptor, or -1 once released; guarded by the mutex.
    private let descriptor: Mutex<Int32>

    init(descriptor: Int32) {
        self.descriptor = Mutex(descriptor)
    }

    deinit {
        release()
    }

    /// Unlocks, then closes. Closing alone would not release the name while another descriptor shares the open file
    /// description — a child this process forked and that has not yet reached `exec` (which closes it, `O_CLOEXEC`)
    /// holds one — so the name would stay taken for as long as any thread of the process is spawning a program
    /// (in a full, parallel test run that shows as `subscriberTaken` right after `stop()`). `LOCK_UN` releases the
    /// lock of the description itself.
    func release() {
        descriptor.withLock { descriptor in
            guard descriptor >= 0 else { return }
            flock(descriptor, LOCK_UN)
            close(descriptor)
            descriptor = -1
        }
    }
}

/// Names held on in-memory databases, which no other process can open.
private final class InMemoryNameLease: FeedNameLease {
    private static let held = Mutex<Set<String>>([])
    private let key: String
    private let released = Mutex(false)

    private init(key: String) {
        self.key = key
    }

    static func tryHold(_ name: String, database: ObjectIdentifier) -> InMemoryNameLease? {
        let key = "\(database.hashValue)/\(name)"
        let taken = held.withLock { $0.insert(key).inserted }
        return taken ? InMemoryNameLease(key: key) : nil
    }

    deinit {
        release()
    }

    func release() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        if first { _ = Self.held.withLock { $0.remove(key) } }
    }
}
