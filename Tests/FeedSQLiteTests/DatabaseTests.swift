import FeedSQLite
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

@testable import FeedSQLite

// Blocks: threads hold SQLite's write lock while others wait on it through their busy timeout; waits on semaphores.
@Suite(.ownThreads) struct DatabaseTests {
    @Test func readWhileAnotherConnectionHoldsAWriteTransactionNeitherBlocksNorFails() throws {
        let dir = TemporaryDirectory()
        let database = try Database(path: dir.file("db.sqlite"))
        try database.write { db throws in
            try db.execute("CREATE TABLE t (x INTEGER)")
            try db.run("INSERT INTO t VALUES (1)")
        }
        var immediate = Configuration()
        immediate.busyMode = .immediateError
        // A second database object (another "process") holds an open write transaction…
        let other = try Database(path: dir.file("db.sqlite"), configuration: immediate)
        try other.write { db in
            try db.run("INSERT INTO t VALUES (2)")
            // …while this one reads: it must see the last committed state at once, with no busy wait allowed.
            let seen = try database.read { db in try db.fetchInt64("SELECT count(*) FROM t") }
            #expect(seen == 1)
        }
        #expect(try database.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == 2)
    }

    @Test func secondWriterGetsBusyWithImmediateErrorPolicy() throws {
        let dir = TemporaryDirectory()
        let database = try Database(path: dir.file("db.sqlite"))
        try database.write { db in try db.execute("CREATE TABLE t (x INTEGER)") }
        var immediate = Configuration()
        immediate.busyMode = .immediateError
        let other = try Database(path: dir.file("db.sqlite"), configuration: immediate)
        try database.write { _ in
            let error = try #require(throws: SQLiteError.self) {
                try other.write { db in try db.run("INSERT INTO t VALUES (1)") }
            }
            #expect(error.isBusy)
        }
    }

    @Test func busyTimeoutWaitsForTheOtherWriterToFinish() async throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let database = try Database(path: path)
        try database.write { db in try db.execute("CREATE TABLE t (x INTEGER)") }
        var patient = Configuration()
        patient.busyMode = .timeout(.seconds(10))
        let other = try Database(path: path, configuration: patient)
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = Thread {
            try? database.write { db in
                try db.run("INSERT INTO t VALUES (1)")
                holding.signal()
                _ = release.wait(timeout: .now() + 10)
            }
        }
        holder.start()
        #expect(holding.wait(timeout: .now() + 10) == .success)
        let done = DispatchSemaphore(value: 0)
        let waiter = Thread {
            _ = try? other.write { db in try db.run("INSERT INTO t VALUES (2)") }
            done.signal()
        }
        waiter.start()
        // The waiter cannot finish while the lock is held…
        #expect(done.wait(timeout: .now() + 0.2) == .timedOut)
        release.signal()
        // …and finishes once it is released, within its timeout.
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(try database.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == 2)
    }

    /// Four writers on four connections (as four processes would be) commit as fast as they can, pausing 0.2 ms
    /// between two commits as a server between two requests would: each waits for the lock between the others'
    /// transactions, and every commit lands within the busy timeout.
    ///
    /// Not back to back: a busy handler polls, it does not queue, so a writer that re-takes the lock the moment it
    /// freed it can keep the others out — on a quiet machine for ~0.1 s at worst (`Docs/bench/busy-wait.sh`, figures
    /// in `Docs/Storage.md`), but on one so loaded (every ThreadSanitizer suite at once) that a transaction takes
    /// tens of milliseconds, three writers can wait out a 10 s timeout at their first commit while the fourth
    /// commits. Between processes that is SQLite's locking, which no busy handler changes.
    @Test func writersOnSeveralConnectionsCommittingAtFullSpeedEachGetTheLock() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        try Database(path: path).write { db in try db.execute("CREATE TABLE t (writer INTEGER, n INTEGER)") }
        var configuration = Configuration()
        configuration.busyMode = .timeout(.seconds(10))
        let writers = 4
        let commits = 1_500
        let databases = try (0..<writers).map { _ in try Database(path: path, configuration: configuration) }
        let failures = Messages()
        let group = DispatchGroup()
        for (writer, database) in databases.enumerated() {
            group.enter()
            let thread = Thread {
                defer { group.leave() }
                for n in 0..<commits {
                    do {
                        try database.write { db in _ = try db.run("INSERT INTO t VALUES (?, ?)", writer, n) }
                        usleep(200)
                    } catch {
                        failures.append("writer \(writer), commit \(n): \(error)")
                        return
                    }
                }
            }
            thread.name = "writer-\(writer)"
            thread.start()
        }
        // Each attempt is bounded by the busy timeout, so the whole run is too; a hang fails here.
        #expect(group.wait(timeout: .now() + 300) == .success, "the writers did not finish within 300 s")
        #expect(failures.values.isEmpty, "\(failures.values.prefix(4))")
        let total = try databases[0].read { db in try db.fetchInt64("SELECT count(*) FROM t") }
        #expect(total == Int64(writers * commits))
    }

    @Test func connectionsGetTheConfiguredPageCache() throws {
        let dir = TemporaryDirectory()
        let database = try Database(path: dir.file("db.sqlite"))
        // The default: 16 MiB on the writer and on every reader (SQLite's own default is 2,000 KiB).
        #expect(Configuration().cacheSizeKiB == 16_384)
        #expect(try database.write { db in try db.fetchInt64("PRAGMA cache_size") } == -16_384)
        #expect(try database.read { db in try db.fetchInt64("PRAGMA cache_size") } == -16_384)
        var sqliteDefault = Configuration()
        sqliteDefault.cacheSizeKiB = nil
        let other = try Database(path: dir.file("db.sqlite"), configuration: sqliteDefault)
        #expect(try other.read { db in try db.fetchInt64("PRAGMA cache_size") } == -2_000)
    }

    @Test func connectionsReadThroughTheConfiguredMemoryMap() throws {
        let dir = TemporaryDirectory()
        let database = try Database(path: dir.file("db.sqlite"))
        // The default: 256 MiB on the writer and on every reader (SQLite's own default is none).
        #expect(Configuration().memoryMapSizeMiB == 256)
        #expect(try database.write { db in try db.fetchInt64("PRAGMA mmap_size") } == 256 * 1_048_576)
        #expect(try database.read { db in try db.fetchInt64("PRAGMA mmap_size") } == 256 * 1_048_576)
        var sqliteDefault = Configuration()
        sqliteDefault.memoryMapSizeMiB = nil
        let other = try Database(path: dir.file("db.sqlite"), configuration: sqliteDefault)
        #expect(try other.read { db in try db.fetchInt64("PRAGMA mmap_size") } == 0)
        #expect(try other.write { db in try db.fetchInt64("PRAGMA mmap_size") } == 0)
    }

    /// A reader stops mapping the file once several of its recent uses each found a new commit (SQLite unmapped the
    /// file at each of them) — also when every other use finds none, as a request that reads twice does — and maps it
    /// again after a run of uses that found the database still.
    @Test func aReaderMapsTheFileOnlyWhileTheDatabaseStaysStill() throws {
        let dir = TemporaryDirectory()
        let database = try Database(path: dir.file("db.sqlite"))
        try database.write { db in try db.execute("CREATE TABLE t (x INTEGER)") }
        let mapped = Int64(256 * 1_048_576)
        // A use that reads the table (which finds any commit since the reader's last use), then the reader's map.
        // Used from one thread, the reader is always the same idle connection.
        func readerMap() throws -> Int64? {
            try database.read { db in
                _ = try db.fetchInt64("SELECT count(*) FROM t")
                return try db.fetchInt64("PRAGMA mmap_size")
            }
        }
        #expect(try readerMap() == mapped)
        // Reads without commits in between never stop the map.
        for _ in 1...(3 * MapPolicy.resumeAfter) { #expect(try readerMap() == mapped) }
        // A commit before every other use.
        var sizes: [Int64?] = []
        for n in 1...MapPolicy.stopAfter {
            _ = try database.write { db in try db.run("INSERT INTO t VALUES (?)", Int64(n)) }
            sizes.append(try readerMap())
            sizes.append(try readerMap())
        }
        #expect(sizes.dropLast(2).allSatisfy { $0 == mapped }, "\(sizes)")
        #expect(sizes.suffix(1) == [0], "no map after \(MapPolicy.stopAfter) of the last uses found a change: \(sizes)")
        for _ in 1..<MapPolicy.resumeAfter { #expect(try readerMap() == 0) }
        #expect(try readerMap() == mapped, "mapped again after \(MapPolicy.resumeAfter) still uses")
        #expect(try database.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == Int64(MapPolicy.stopAfter))
    }

    @Test func readsRunOnReadOnlyConnections() throws {
        let dir = TemporaryDirectory()
        let database = try Database(path: dir.file("db.sqlite"))
        try database.write { db in try db.execute("CREATE TABLE t (x INTEGER)") }
        let error = try #require(throws: SQLiteError.self) {
            try database.read { db in try db.run("INSERT INTO t VALUES (1)") }
        }
        #expect(error.code.primary == .readOnly)
    }

    @Test func inMemoryDatabaseServesReadsFromItsWriter() throws {
        let database = try Database.inMemory()
        try database.write { db throws in
            try db.execute("CREATE TABLE t (x INTEGER)")
            try db.run("INSERT INTO t VALUES (7)")
        }
        #expect(try database.read { db in try db.fetchInt64("SELECT x FROM t") } == 7)
    }

    @Test func concurrentReadersAndWriterStayConsistent() throws {
        let dir = TemporaryDirectory()
        let database = try Database(path: dir.file("db.sqlite"))
        try database.write { db in try db.execute("CREATE TABLE t (x INTEGER)") }
        let failures = LockedCounter()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for i in 0..<50 {
                do {
                    if worker % 2 == 0 {
                        try database.write { db throws in
                            try db.run("INSERT INTO t VALUES (?)", i)
                            try db.run("INSERT INTO t VALUES (?)", -i)
                        }
                    } else {
                        // Every committed write adds a pair summing to zero: a snapshot never sees half of one.
                        let sum = try database.read { db in try db.fetchInt64("SELECT coalesce(sum(x), 0) FROM t") }
                        if sum != 0 { failures.increment() }
                    }
                } catch {
                    failures.increment()
                }
            }
        }
        #expect(failures.value == 0)
        #expect(try database.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == 400)
    }

    @Test func usingAConnectionAfterItsClosureTraps() async {
        await #expect(processExitsWith: .failure) {
            let database = try Database.inMemory()
            let escaped = try database.write { db in db }
            _ = try escaped.run("SELECT 1")
        }
    }
}

/// Opening without writing: validation before the WAL switch, read-only databases that tidy up, literal paths.
@Suite struct OpeningWithoutWritingTests {
    struct Refused: Error {}

    /// A database file in rollback-journal mode (`journal_mode=DELETE`) with one table and one row.
    private func rollbackJournalDatabase(_ path: String) throws {
        let connection = try Connection(location: .file(path))
        try connection.execute("PRAGMA journal_mode = DELETE; CREATE TABLE t (x); INSERT INTO t VALUES (1); PRAGMA user_version = 7;")
        connection.close()
    }

    /// Bytes 18 and 19 of the header: 1 for a rollback journal, 2 for WAL.
    private func fileFormatVersions(_ path: String) -> [UInt8] {
        Array((fileBytes(path) ?? Data())[18..<20])
    }

    @Test func refusingValidationLeavesARollbackJournalFileByteIdentical() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        try rollbackJournalDatabase(path)
        let before = try #require(fileBytes(path))
        #expect(fileFormatVersions(path) == [1, 1])
        var seenVersion: Int64?
        #expect(throws: Refused.self) {
            _ = try Database(location: .file(path)) { db in
                seenVersion = try db.fetchInt64("PRAGMA user_version")
                throw Refused()
            }
        }
        #expect(seenVersion == 7)
        #expect(fileBytes(path) == before)
        #expect(fileFormatVersions(path) == [1, 1])
        for suffix in ["-wal", "-shm", "-journal"] {
            #expect(!FileManager.default.fileExists(atPath: path + suffix), "\(suffix) was created")
        }
        // A read-only database refuses the same way.
        var readOnly = Configuration()
        readOnly.readOnly = true
        readOnly.removesWALFilesOnClose = true
        #expect(throws: Refused.self) { _ = try Database(location: .file(path), configuration: readOnly) { _ in throw Refused() } }
        #expect(fileBytes(path) == before)
    }

    @Test func acceptedValidationIsFollowedByTheWALSwitch() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        try rollbackJournalDatabase(path)
        var modeDuringValidation: String?
        let database = try Database(location: .file(path)) { db in
            modeDuringValidation = try db.fetchOne("PRAGMA journal_mode") { $0.string(at: 0) }
        }
        #expect(modeDuringValidation == "delete")
        #expect(try database.writeWithoutTransaction { db in try db.fetchOne("PRAGMA journal_mode") { $0.string(at: 0) } } == "wal")
        database.close()
        #expect(fileFormatVersions(path) == [2, 2])
    }

    @Test func readOnlyDatabaseRemovesTheWALFilesItsReadsCreatedOnlyWhenAsked() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        do {
            let database = try Database(path: path)
            try database.write { db in try db.execute("CREATE TABLE t (x); INSERT INTO t VALUES (1);") }
            database.close()
        }
        let before = try #require(fileBytes(path))
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        var configuration = Configuration()
        configuration.readOnly = true
        // SQLite's own behaviour: reading a WAL database creates -wal and -shm, and a read-only connection cannot
        // remove them.
        do {
            let plain = try Database(path: path, configuration: configuration)
            #expect(try plain.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == 1)
            plain.close()
        }
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        try FileManager.default.removeItem(atPath: path + "-wal")
        try FileManager.default.removeItem(atPath: path + "-shm")

        configuration.removesWALFilesOnClose = true
        let tidy = try Database(path: path, configuration: configuration)
        #expect(try tidy.read { db in try db.fetchInt64("SELECT count(*) FROM t") } == 1)
        let error = try #require(throws: SQLiteError.self) { try tidy.write { db in try db.run("INSERT INTO t VALUES (2)") } }
        #expect(error.code.primary == .readOnly)
        tidy.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        #expect(fileBytes(path) == before)
    }

    @Test func readOnlyDatabaseOfAMissingFileFailsAndCreatesNothing() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("none.sqlite")
        var configuration = Configuration()
        configuration.readOnly = true
        configuration.removesWALFilesOnClose = true
        let error = try #require(throws: SQLiteError.self) { try Database(path: path, configuration: configuration) }
        #expect(error.code.primary == .cannotOpen)
        #expect(!FileManager.default.fileExists(atPath: path))
    }

    @Test func aFilePathIsNeverReadAsAURIOrASpecialName() throws {
        let dir = TemporaryDirectory()
        let target = dir.file("x.sqlite")
        // As a URI, "file:/…/x.sqlite" would open (and create) x.sqlite; as a path it names a file inside a
        // directory "file:" of the working directory, which does not exist.
        let uri = try #require(throws: SQLiteError.self) { try Connection(location: .file("file:" + target)) }
        #expect(uri.code.primary == .cannotOpen)
        #expect(!FileManager.default.fileExists(atPath: target))
        // SQLite would open a private temporary database for an empty name.
        let empty = try #require(throws: SQLiteError.self) { try Connection(location: .file("")) }
        #expect(empty.code.primary == .cannotOpen)
    }
}

/// Messages appended from several threads (an `NSLock`, which ThreadSanitizer sees).
final class Messages: @unchecked Sendable {
    // `@unchecked Sendable`: `storage` is only touched while `lock` is held.
    private let lock = NSLock()
    private var storage: [String] = []
    func append(_ message: String) { lock.withLock { storage.append(message) } }
    var values: [String] { lock.withLock { storage } }
}

/// A counter safe to bump from several threads.
final class LockedCounter: Sendable {
    private let storage = Mutex(0)
    func increment() { storage.withLock { $0 += 1 } }
    var value: Int { storage.withLock { $0 } }
}

import Synchronization
