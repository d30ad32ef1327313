import FeedSQLite
import FeedTestSupport
import Foundation
import Testing

@Suite struct DatabaseTests {
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

/// A counter safe to bump from several threads.
final class LockedCounter: Sendable {
    private let storage = Mutex(0)
    func increment() { storage.withLock { $0 += 1 } }
    var value: Int { storage.withLock { $0 } }
}

import Synchronization
