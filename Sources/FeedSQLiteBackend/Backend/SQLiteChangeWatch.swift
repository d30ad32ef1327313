internal import FeedCore
internal import Synchronization
internal import FeedSQLite
internal import Foundation

/// The SQLite backend's ``FeedChangeWatch``: a read-only connection's `PRAGMA data_version` says whether another
/// connection committed, inotify on the database's directory says when to look, and the file's device and inode
/// say whether the path still names the file being followed.
final class SQLiteChangeWatch: FeedChangeWatch {
    private let path: String
    private let identity: FileIdentity
    private let watcher: FileChangeWatcher
    /// The watch connection and the last data version seen; used only by the change feed's thread, `wake()` aside.
    private let state: Mutex<WatchState>

    private struct WatchState: ~Copyable {
        var connection: Connection?
        var lastVersion: Int64?
    }

    /// A file notification can come before its commit is visible: commits are visible microseconds after their last
    /// `-wal` write, and the tail covers a writer descheduled in between.
    let recheckDelays: [Duration] = [
        .microseconds(100), .microseconds(400), .milliseconds(1), .milliseconds(2), .milliseconds(4), .milliseconds(8),
    ]

    init(path: String, configuration: Configuration, watchFiles: Bool) throws(StorageError) {
        let connection: Connection
        do {
            connection = try Connection(location: .file(path), readOnly: true, configuration: configuration)
        } catch {
            throw StorageError(error, path: path)
        }
        guard case .file(let identity) = FileIdentity.lookUp(path) else {
            connection.close()
            throw StorageError.databaseReplaced(path: path)
        }
        self.path = path
        self.identity = identity
        self.watcher = FileChangeWatcher(databasePath: path, enabled: watchFiles)
        self.state = Mutex(WatchState(connection: connection))
    }

    func poll() throws -> Bool {
        switch FileIdentity.lookUp(path) {
        case .file(identity), .unknown: break
        case .file, .missing: throw StorageError.databaseReplaced(path: path)
        }
        return try state.withLock { state throws -> Bool in
            guard let connection = state.connection else { throw StorageError.cannotOpen(path: path, reason: "the watch was closed") }
            let version: Int64
            do {
                version = try connection.dataVersion()
            } catch let error as SQLiteError {
                throw StorageError(error, path: path)
            }
            defer { state.lastVersion = version }
            return version != state.lastVersion
        }
    }

    func wait(timeout: Duration) -> FeedChangeWake {
        switch watcher.wait(timeout: timeout) {
        case .fileChanged: .changed
        case .timedOut: .timedOut
        case .woken: .woken
        }
    }

    func wake() {
        watcher.wake()
    }

    func close() {
        // Closing runs no callback, so doing it under the lock is safe.
        state.withLock { state in
            state.connection?.close()
            state.connection = nil
        }
    }
}

/// A file's device and inode: which file a path names.
struct FileIdentity: Equatable, Sendable {
    let device: UInt64
    let inode: UInt64

    /// What a path names now.
    enum Lookup: Equatable {
        /// This file.
        case file(FileIdentity)
        /// Nothing: the path or one of its directories does not exist.
        case missing
        /// `stat(2)` failed otherwise (permissions, memory); nothing is known.
        case unknown
    }

    /// Looks up `path` with one `stat(2)`.
    static func lookUp(_ path: String) -> Lookup {
        var info = stat()
        guard stat(path, &info) == 0 else {
            return errno == ENOENT || errno == ENOTDIR ? .missing : .unknown
        }
        return .file(FileIdentity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino)))
    }
}
