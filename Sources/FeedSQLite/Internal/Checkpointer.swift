internal import CSQLite
internal import Foundation
internal import Synchronization

/// Checkpoints a WAL database on a thread of its own, so that the writer's commits do not wait for it
/// (``CheckpointPolicy/background(pages:limit:)``).
///
/// SQLite's automatic checkpoint runs inside the `COMMIT` that leaves the write-ahead log at 1,000 pages or more:
/// that commit copies the log's pages into the database file and waits for two `fdatasync`s. The writer of W1 spends
/// ~20 % of its time there (`feedsync-bench w1 --checkpoint inline`; `Docs/decisions/0003-background-wal-checkpoints.md`).
/// Here the writer connection's WAL hook replaces that checkpoint:
///
/// - **Threads.** The hook runs on the writer's thread after every commit, with the write lock already released
///   (SQLite's contract). At `pages` or more it sets a flag and signals this object's thread — started on the first
///   such commit, so a short-lived process that never fills the log starts none — and returns. The thread, with a
///   read-write connection of its own, runs a `PASSIVE` checkpoint, which takes SQLite's checkpoint lock but neither
///   the write lock nor any reader's, and never calls a busy handler: the writer keeps committing meanwhile.
/// - **Bound.** A passive checkpoint copies only the frames committed before it began, and the log starts over from
///   its first frame only when a write begins with every frame copied, which a writer that never pauses may never
///   leave time for. So at `limit` pages the hook checkpoints on the writer itself (as SQLite would have, once every
///   `limit ÷ pages` times instead of every time); that finishes what the thread copied, and the next write restarts
///   the log. If the thread is checkpointing at that moment, the writer's attempt returns `SQLITE_BUSY` at once and
///   the next commit tries again.
/// - **Who waits for whom.** The writer waits for nothing here but the short lock around the flags (never held
///   across a checkpoint). The thread waits for its condition and for the file system. ``stop()`` — called by
///   ``Database/close()`` before the writer closes, so that the writer is still the last connection and removes the
///   `-wal` and `-shm` files — waits for the thread to end, at most one checkpoint; a released database only asks
///   it to end and to close the writer after its own connection (``requestStop(closingAfter:)``). The thread runs
///   no callback and takes no lock of the library's, so nothing it does can wait for a thread that waits for it.
/// - **Failure.** If the thread cannot open its connection, the hook checkpoints on the writer at `pages`, which is
///   SQLite's own behaviour. Checkpoints change nothing that was committed: a crash during one is recovered by SQLite
///   from the log.
///
/// `@unchecked Sendable`: every stored `var` is read and written only while `condition` (an `NSCondition`) is
/// locked; `lastLog` is an atomic; `location`, `configuration`, `pages` and `limit` are immutable.
final class Checkpointer: @unchecked Sendable {
    let pages: Int
    let limit: Int
    private let location: Connection.Location
    private let configuration: Configuration
    private let condition = NSCondition()
    private var requested = false
    private var stopping = false
    private var started = false
    /// The thread has closed its connection and returns.
    private var ended = false
    /// The writer of a released database, which the thread closes after its own connection (``requestStop(closingAfter:)``).
    private var closeLast: SerializedConnection?
    /// The thread could not open its connection: the writer checkpoints at `pages`.
    private var failed = false
    private var counts = CheckpointStatistics()
    /// The log's size after the writer's last commit (every commit, so not under the lock).
    private let lastLog = Atomic<Int>(0)
    /// The log's size at the last commit seen at `pages` or more, and the size at which the thread is asked next.
    private var lastSeen = 0
    private var nextRequest: Int

    init(location: Connection.Location, configuration: Configuration, pages: Int, limit: Int) {
        self.location = location
        self.configuration = configuration
        self.pages = pages
        self.limit = limit
        nextRequest = pages
    }

    /// Replaces `writer`'s automatic checkpoint with this object's hook; the connection keeps this object alive.
    func install(on writer: Connection) {
        writer.walHookOwner = self
        sqlite3_wal_hook(writer.handle, Checkpointer.hook, Unmanaged.passUnretained(self).toOpaque())
    }

    var statistics: CheckpointStatistics {
        var statistics = condition.withLock { counts }
        statistics.lastLog = lastLog.load(ordering: .relaxed)
        return statistics
    }

    /// Ends the thread (after the checkpoint it may be running) and closes its connection; later commits checkpoint
    /// on the writer at `limit`. Every call (``Database/close()``, or two threads closing) returns once the thread
    /// has ended.
    func stop() {
        condition.withLock {
            stopping = true
            condition.broadcast()
            while started && !ended { condition.wait() }
        }
    }

    /// Asks the thread to end and returns at once (a released database's `deinit`). The thread ends after the
    /// checkpoint it may be running and closes its connection, then `writer`: the writer closes last and removes
    /// the `-wal` and `-shm` files (two connections closing at the same moment would each see the other and leave
    /// them). Without a running thread, `writer` is closed here.
    func requestStop(closingAfter writer: SerializedConnection?) {
        let closeHere = condition.withLock { () -> Bool in
            stopping = true
            condition.broadcast()
            guard started && !ended else { return true }
            closeLast = writer
            return false
        }
        if closeHere { writer?.close() }
    }

    // MARK: - The writer's side

    private static let hook: @convention(c) (UnsafeMutableRawPointer?, OpaquePointer?, UnsafePointer<CChar>?, Int32) -> Int32 = {
        context, db, schema, pages in
        guard let context, let db else { return SQLITE_OK }
        Unmanaged<Checkpointer>.fromOpaque(context).takeUnretainedValue().committed(walPages: Int(pages), writer: db, schema: schema)
        return SQLITE_OK
    }

    /// Called on the writer's thread after each commit, with the number of pages in the log.
    ///
    /// The thread is asked once per `pages` pages the log grows by (at `pages`, `2 × pages`, …), not after every
    /// commit past `pages`: checkpoints run back to back would keep the thread inside one at almost every moment,
    /// and the log can start over only when a write begins while no checkpoint is running.
    private func committed(walPages: Int, writer: OpaquePointer, schema: UnsafePointer<CChar>?) {
        lastLog.store(walPages, ordering: .relaxed)
        guard walPages >= pages else { return }
        let onWriter = condition.withLock { () -> Bool in
            // The log started over since the last commit seen here (commits below `pages` are not seen).
            if walPages < lastSeen { nextRequest = pages }
            lastSeen = walPages
            counts.largestLog = max(counts.largestLog, walPages)
            if walPages >= limit || failed { return true }
            guard walPages >= nextRequest, !stopping else { return false }
            nextRequest = walPages + pages
            requested = true
            if started {
                condition.broadcast()
            } else {
                started = true
                startThread()
            }
            return false
        }
        guard onWriter else { return }
        let code = sqlite3_wal_checkpoint_v2(writer, schema, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
        condition.withLock {
            if code == SQLITE_OK { counts.onWriter += 1 } else { counts.busy += 1 }
        }
    }

    // MARK: - The thread

    private func startThread() {
        let thread = Thread { [self] in run() }
        thread.name = "feedsync-ckpt"
        thread.start()
    }

    private func run() {
        // Opened here and used only on this thread; it never writes (the journal mode is the writer's).
        let connection = try? Connection(location: location, access: .readWriteExisting, configuration: configuration)
        defer {
            connection?.close()
            let writer = condition.withLock { () -> SerializedConnection? in
                ended = true
                condition.broadcast()
                defer { closeLast = nil }
                return closeLast
            }
            writer?.close()
        }
        while true {
            let proceed = condition.withLock { () -> Bool in
                while !requested && !stopping { condition.wait() }
                requested = false
                if connection == nil { failed = true }
                return !stopping && connection != nil
            }
            guard proceed, let connection else { return }
            let code = sqlite3_wal_checkpoint_v2(connection.handle, nil, SQLITE_CHECKPOINT_PASSIVE, nil, nil)
            condition.withLock {
                if code == SQLITE_OK { counts.background += 1 } else { counts.busy += 1 }
            }
        }
    }
}
