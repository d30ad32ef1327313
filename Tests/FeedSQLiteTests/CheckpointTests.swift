import FeedSQLite
import FeedTestSupport
import Foundation
import FeedTestThreads
import Synchronization
import Testing

/// ``CheckpointPolicy``: the background checkpoint thread, the writer's bound, closing, SQLite's own policy.
// Blocks: waits for the checkpointer thread (bounded polls) and on semaphores while a reader holds a snapshot.
@Suite(.ownThreads) struct CheckpointTests {
    /// Each insert writes a 3,000-byte value: at least one page of the log per transaction.
    private static let row = String(repeating: "x", count: 3_000)
    private static let frame = 4_096 + 24

    private func open(_ path: String, _ policy: CheckpointPolicy) throws -> Database {
        var configuration = Configuration()
        configuration.checkpointPolicy = policy
        // Two databases write to one file in a test below; a loaded CI machine must not turn their turns into BUSY.
        configuration.busyMode = .timeout(.seconds(30))
        let database = try Database(path: path, configuration: configuration)
        _ = try database.write { db in try db.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT)") }
        return database
    }

    private func insert(_ database: Database, count: Int) throws {
        for _ in 0..<count {
            _ = try database.write { db in try db.run("INSERT INTO t (v) VALUES (?)", Self.row) }
        }
    }

    @Test func belowTheLimitTheThreadCheckpointsAndTheWriterDoesNot() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let database = try open(path, .background(pages: 50, limit: 1_000_000))
        defer { database.close() }
        let sizeBefore = fileSize(path)
        try insert(database, count: 300)
        #expect(eventually { database.checkpoints.background >= 1 }, "the thread checkpointed: \(database.checkpoints)")
        #expect(database.checkpoints.onWriter == 0)
        // The rows' pages reached the database file itself, not only the log.
        #expect(eventually { fileSize(path) >= sizeBefore + 250 * 4_096 }, "database file: \(fileSize(path)) bytes")
    }

    @Test func atTheLimitTheWriterCheckpointsAndTheLogStartsOver() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let database = try open(path, .background(pages: 50, limit: 200))
        try insert(database, count: 2_000)
        let statistics = database.checkpoints
        #expect(statistics.onWriter >= 1, "\(statistics)")
        // Without the writer's checkpoint the log would hold 2,000 frames and more here: a passive checkpoint alone
        // never lets it start over while writes go on. With it, every commit that leaves the log at the limit or
        // more checkpoints on the writer (`onWriter`) or finds the thread checkpointing (`busy`, tried again at the
        // next commit); each of these commits adds at most 3 frames (a row's page and the pages above it). (How soon
        // the log starts over depends on when the thread is idle at a write's start: see the long-reader test.)
        #expect(
            statistics.largestLog <= 200 + 3 * (statistics.onWriter + statistics.busy),
            "the log outgrew the writer's checkpoints: \(statistics)")
        #expect(try database.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == 2_000)
        #expect(try database.read { db in try db.fetchOne("PRAGMA integrity_check") { $0.string(at: 0) } } == "ok")
        database.close()
    }

    @Test func closingEndsTheThreadFirstSoTheWriterRemovesTheLog() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let database = try open(path, .background(pages: 20, limit: 1_000_000))
        try insert(database, count: 500)
        #expect(eventually { database.checkpoints.background >= 1 })
        database.close()
        database.close()  // a second close returns at once
        // The writer removes the -wal and -shm files only as the last connection: the thread's was closed before it.
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        let reopened = try open(path, .inline(pages: 1_000))
        defer { reopened.close() }
        #expect(try reopened.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == 500)
    }

    /// Releasing the database instead of closing it only asks the thread to end: the thread closes its connection
    /// after its checkpoint, and whichever connection closes last removes the log.
    @Test func releasingEndsTheThreadWithoutWaitingAndTheLastConnectionRemovesTheLog() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        var database: Database? = try open(path, .background(pages: 20, limit: 1_000_000))
        try insert(database!, count: 500)
        #expect(eventually { database!.checkpoints.background >= 1 })
        database = nil
        #expect(
            eventually(seconds: 30) {
                !FileManager.default.fileExists(atPath: path + "-wal")
                    && !FileManager.default.fileExists(atPath: path + "-shm")
            }, "the log of a released database stayed")
        let reopened = try open(path, .inline(pages: 1_000))
        defer { reopened.close() }
        #expect(try reopened.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == 500)
    }

    /// A reader holding an old snapshot keeps every checkpoint from finishing, so the log cannot start over: the writer
    /// goes on committing (it never waits for a checkpoint) and the log grows; once the reader ends, the next
    /// checkpoint finishes and the log starts over.
    @Test func aLongReaderMakesTheLogGrowButNeverStopsTheWriter() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let database = try open(path, .background(pages: 20, limit: 80))
        defer { database.close() }
        try insert(database, count: 10)
        let snapshotHeld = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let readerDone = DispatchSemaphore(value: 0)
        let reader = Thread {
            _ = try? database.read { db in
                _ = try db.fetchInt64("SELECT count(*) FROM t")  // the snapshot starts here
                snapshotHeld.signal()
                _ = release.wait(timeout: .now() + 60)
            }
            readerDone.signal()
        }
        reader.start()
        #expect(snapshotHeld.wait(timeout: .now() + 10) == .success)
        let writer = Thread {
            try? insert(database, count: 400)
            release.signal()
        }
        writer.start()
        // Bounded: the writes finish although no checkpoint can (the writer waits for none).
        #expect(readerDone.wait(timeout: .now() + 60) == .success, "the writer stalled: \(database.checkpoints)")
        let held = database.checkpoints
        #expect(held.largestLog >= 400, "the log could not start over while the snapshot was held: \(held)")
        // The log starts over at the first write that begins with every frame copied and no checkpoint running:
        // write until one did (bounded; on a loaded machine the thread's checkpoints may overlap a few writes).
        var written = 0
        while database.checkpoints.lastLog >= 80 && written < 5_000 {
            try insert(database, count: 1)
            written += 1
        }
        #expect(database.checkpoints.lastLog < 80, "the log never started over after the reader ended: \(database.checkpoints)")
        #expect(try database.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == Int64(410 + written))
    }

    @Test func theInlinePolicyIsSQLitesOwnAndStartsNoThread() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let database = try open(path, .inline(pages: 50))
        defer { database.close() }
        try insert(database, count: 300)
        #expect(database.checkpoints == CheckpointStatistics())
        // SQLite's automatic checkpoint at 50 pages restarts the log: it never holds much more than that.
        let walFrames = fileSize(path + "-wal") / Self.frame
        #expect(walFrames <= 60, "the log held \(walFrames) frames with checkpoints at 50")
    }

    @Test(arguments: [(0, 10), (-1, 10), (100, 99)])
    func anInvalidPolicyIsRefusedBeforeTheFileIsCreated(pages: Int, limit: Int) throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        var configuration = Configuration()
        configuration.checkpointPolicy = .background(pages: pages, limit: limit)
        let error = try #require(throws: SQLiteError.self) { _ = try Database(path: path, configuration: configuration) }
        #expect(error.code == .misuse)
        #expect(error.message.contains("pages: \(pages), limit: \(limit)"), "\(error.message)")
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    /// Writers on two `Database`s of one file (each with its own checkpoint thread) and snapshot readers, with
    /// checkpoints every few transactions: every snapshot consistent, every row kept, the file intact, no stall.
    @Test func checkpointsUnderConcurrentWritersOfTwoDatabasesAndReaders() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let first = try open(path, .background(pages: 30, limit: 120))
        let second = try open(path, .background(pages: 30, limit: 120))
        let writes = 300
        let progress = Atomic<Int>(0)
        let failures = Mutex<[String]>([])
        let done = DispatchSemaphore(value: 0)
        let threads = 6
        for index in 0..<threads {
            let thread = Thread {
                defer { done.signal() }
                let database = index.isMultiple(of: 2) ? first : second
                do {
                    if index < 4 {
                        for _ in 0..<writes {
                            // Two rows a transaction, one of them negative: a snapshot sees both or neither.
                            try database.write { db in
                                try db.run("INSERT INTO t (v) VALUES (?)", Self.row)
                                try db.run("INSERT INTO t (id, v) VALUES (-last_insert_rowid(), 'pair')")
                            }
                            progress.wrappingAdd(1, ordering: .relaxed)
                        }
                    } else {
                        for _ in 0..<writes {
                            let (positive, negative) = try database.read { db in
                                (
                                    try db.fetchInt64("SELECT count(*) FROM t WHERE id > 0") ?? -1,
                                    try db.fetchInt64("SELECT count(*) FROM t WHERE id < 0") ?? -1
                                )
                            }
                            if positive != negative { failures.withLock { $0.append("snapshot \(positive)/\(negative)") } }
                            progress.wrappingAdd(1, ordering: .relaxed)
                        }
                    }
                } catch {
                    failures.withLock { $0.append("thread \(index): \(error)") }
                }
            }
            thread.name = "ckpt-test-\(index)"
            thread.start()
        }
        // Watchdog: fails on a stall (no progress for 30 s), printing how far the threads got.
        var finished = 0
        var last = -1
        var lastChange = ContinuousClock.now
        while finished < threads {
            if done.wait(timeout: .now() + 0.5) == .success {
                finished += 1
                continue
            }
            let now = progress.load(ordering: .relaxed)
            if now != last {
                last = now
                lastChange = .now
            } else if ContinuousClock.now - lastChange > .seconds(30) {
                let state = "\(first.checkpoints) / \(second.checkpoints)"
                Issue.record("stalled at \(now) steps, \(finished) of \(threads) threads done; \(state)")
                return
            }
        }
        #expect(failures.withLock { $0 } == [])
        #expect(try first.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == Int64(4 * writes * 2))
        #expect(try first.read { db in try db.fetchOne("PRAGMA integrity_check") { $0.string(at: 0) } } == "ok")
        let all = (first.checkpoints.background + second.checkpoints.background, first.checkpoints.onWriter + second.checkpoints.onWriter)
        #expect(all.0 + all.1 >= 1, "checkpoints ran: \(first.checkpoints) / \(second.checkpoints)")
        first.close()
        second.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
    }
}
