import FeedCore
import FeedPostgresBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// Blocks: waits on semaphores for reader threads sharing the pool's connections, and joins them.
@Suite(.ownThreads) struct ConnectionTests {
    /// Opens `count` pooled connections at once: `count` reads that each wait until all have started.
    private func openConnections(_ backend: PostgresBackend, count: Int) {
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let readers = (0..<count).map { index in
            spawn("reader \(index)") {
                do {
                    try backend.read { tx throws in
                        _ = try tx.lastSeq()
                        started.signal()
                        waitFor(release, "the other readers")
                    }
                } catch {
                    Issue.record("read failed: \(error)")
                }
            }
        }
        for _ in 0..<count { waitFor(started, "a reader to start") }
        for _ in 0..<count { release.signal() }
        join(readers)
    }

    /// Idle connections whose server sessions ended (as after a server restart) never reach a caller: the next read
    /// and the next write succeed at once on new connections.
    @Test func connectionsTheServerClosedWhileIdleNeverReachACaller() throws {
        guard let db = try TestDatabase.make("connection_lost", options: PostgresOptions(maximumConnections: 3)) else { return }
        let backend = db.backend
        openConnections(backend, count: 3)
        #expect(try feedSyncSessions(db).count == 3)
        try terminateFeedSyncSessions(db)
        #expect(try backend.readOnce { tx in try tx.lastSeq() } == 0)
        #expect(try backend.read { tx in try tx.lastSeq() } == 0)

        openConnections(backend, count: 3)
        try terminateFeedSyncSessions(db)
        try write(backend) { tx in _ = try tx.insertUser(id: "u1", name: "", at: testTime) }
        #expect(try backend.readOnce { tx in try tx.allUsers().map(\.id) } == ["u1"])
    }

    /// A connection lost after the server answered part of a call fails that call with `connectionLost`, and the
    /// call is not run again (the server may have done part of it): the body ran once, nothing committed.
    @Test func aConnectionLostInsideATransactionFailsThatCallOnce() throws {
        guard let db = try TestDatabase.make("connection_lost_inside", options: PostgresOptions(maximumConnections: 1)) else { return }
        let backend = db.backend
        let runs = Shared(0)
        let error = try #require(throws: StorageError.self) {
            try write(backend) { tx throws in
                runs.update { $0 += 1 }
                _ = try tx.insertUser(id: "u1", name: "", at: testTime)
                try terminateFeedSyncSessions(db)
                _ = try tx.insertUser(id: "u2", name: "", at: testTime)
            }
        }
        guard case .connectionLost(let location, _) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(location == backend.location)
        #expect(runs.update { $0 } == 1)
        #expect(try backend.readOnce { tx in try tx.allUsers().map(\.id) } == [])
    }

    @Test func aDeadlockRerunsTheBodyAndCommitsOnce() throws {
        guard let db = try TestDatabase.make("connection_deadlock") else { return }
        let backend = db.backend
        try write(backend) { tx throws in
            _ = try tx.insertUser(id: "a", name: "", at: testTime)
            _ = try tx.insertUser(id: "b", name: "", at: testTime)
        }
        let attempts = Shared<[String: Int]>([:])
        let firstLocked = DispatchSemaphore(value: 0)
        let secondLocked = DispatchSemaphore(value: 0)
        let failures = Shared<[String]>([])

        /// Locks `first`, waits for the other writer to lock its row (first attempt only), then locks `second`.
        func writer(_ name: String, first: String, second: String, mine: DispatchSemaphore, theirs: DispatchSemaphore) -> DispatchGroup {
            spawn(name) {
                do {
                    try write(backend) { tx throws in
                        let attempt = attempts.update { counts -> Int in
                            counts[name, default: 0] += 1
                            return counts[name, default: 0]
                        }
                        try tx.userStatements.execute("UPDATE users SET name = name || $1 WHERE id = $2", [.text(name), .text(first)])
                        if attempt == 1 {
                            mine.signal()
                            waitFor(theirs, "the other writer's first lock")
                        }
                        try tx.userStatements.execute("UPDATE users SET name = name || $1 WHERE id = $2", [.text(name), .text(second)])
                        _ = try tx.appendEvent(kind: .userCreated, userID: name, postID: nil, likeCount: nil, at: testTime)
                    }
                } catch {
                    failures.update { $0.append("\(name): \(error)") }
                }
            }
        }
        let one = writer("x", first: "a", second: "b", mine: firstLocked, theirs: secondLocked)
        let two = writer("y", first: "b", second: "a", mine: secondLocked, theirs: firstLocked)
        join([one, two])

        #expect(failures.current.isEmpty)
        // PostgreSQL broke the deadlock by failing one of them (40P01), whose body then ran again. That rerun
        // locks its first row afresh, and may win it before the survivor (just woken from its wait on that
        // row) does: then the two deadlock once more and one body runs a third time. So: at least one rerun,
        // within the retry limit (5 attempts each), and below, each body committed exactly once.
        let counts = attempts.current.values.sorted()
        #expect(counts.count == 2)
        #expect((counts.last ?? 0) >= 2)
        #expect(counts.allSatisfy { (1...5).contains($0) })
        try backend.read { tx throws in
            #expect(try tx.events(after: 0, limit: nil).map(\.seq) == [1, 2])
            #expect(Set(try tx.events(after: 0, limit: nil).map(\.userID)) == ["x", "y"])
            let names = try tx.userStatements.fetch("SELECT name FROM users ORDER BY id", []).compactMap { $0.first?.text }
            #expect(names.allSatisfy { $0.count == 2 && $0.contains("x") && $0.contains("y") })
        }
    }

    @Test func aDeadlockBeyondTheRetryLimitIsBusy() throws {
        guard let db = try TestDatabase.make("connection_busy", options: PostgresOptions(retryLimit: 1)) else { return }
        let backend = db.backend
        try write(backend) { tx throws in
            _ = try tx.insertUser(id: "a", name: "", at: testTime)
            _ = try tx.insertUser(id: "b", name: "", at: testTime)
        }
        let firstLocked = DispatchSemaphore(value: 0)
        let secondLocked = DispatchSemaphore(value: 0)
        let outcomes = Shared<[String]>([])
        func writer(_ name: String, first: String, second: String, mine: DispatchSemaphore, theirs: DispatchSemaphore) -> DispatchGroup {
            spawn(name) {
                do {
                    try write(backend) { tx throws in
                        try tx.userStatements.execute("UPDATE users SET name = $1 WHERE id = $2", [.text(name), .text(first)])
                        mine.signal()
                        waitFor(theirs, "the other writer's first lock")
                        try tx.userStatements.execute("UPDATE users SET name = $1 WHERE id = $2", [.text(name), .text(second)])
                    }
                    outcomes.update { $0.append("committed") }
                } catch let error as StorageError {
                    if case .busy(let failure) = error {
                        outcomes.update { $0.append("busy \(failure.code)") }
                    } else {
                        outcomes.update { $0.append("\(error)") }
                    }
                } catch {
                    outcomes.update { $0.append("\(error)") }
                }
            }
        }
        join([
            writer("x", first: "a", second: "b", mine: firstLocked, theirs: secondLocked),
            writer("y", first: "b", second: "a", mine: secondLocked, theirs: firstLocked),
        ])
        #expect(outcomes.current.sorted() == ["busy 40P01", "committed"])
    }

    @Test func aFullPoolMakesCallersWaitThenBusy() throws {
        guard
            let db = try TestDatabase.make(
                "connection_pool", options: PostgresOptions(maximumConnections: 1, poolTimeout: .milliseconds(200)))
        else { return }
        let backend = db.backend
        let holding = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let holder = spawn("holder") {
            do {
                try backend.read { _ in
                    holding.signal()
                    waitFor(release, "the release")
                }
            } catch {
                Issue.record("read failed: \(error)")
            }
        }
        waitFor(holding, "the holder")
        let error = try #require(throws: StorageError.self) { try backend.readOnce { tx in try tx.lastSeq() } }
        guard case .busy(let failure) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(failure.code == "53300")
        release.signal()
        join([holder])
        #expect(try backend.readOnce { tx in try tx.lastSeq() } == 0)
    }

    /// A backend that writes keeps its sessions read-write (a like batch is one autocommit statement); one opened
    /// only to read makes every session read-only, so nothing it sends can write.
    @Test func sessionsAreNamedFeedsyncAndReadOnlyWhenTheBackendOnlyReads() throws {
        guard let db = try TestDatabase.make("connection_settings", options: PostgresOptions(statementTimeout: .seconds(7))) else { return }
        let query = """
            SELECT current_setting('application_name'), current_setting('statement_timeout'),
                   current_setting('default_transaction_read_only')
            """
        #expect(
            try db.backend.readOnce { tx throws in try tx.userStatements.fetch(query, []) } == [
                [.text("feedsync"), .text("7s"), .text("off")]
            ])
        let reader = try PostgresBackend(url: db.url, options: PostgresOptions(statementTimeout: .seconds(7)), mode: .readCurrent)
        defer { reader.close() }
        #expect(
            try reader.readOnce { tx throws in try tx.userStatements.fetch(query, []) } == [[.text("feedsync"), .text("7s"), .text("on")]])
        #expect(throws: StorageError.self) {
            try reader.readOnce { tx throws in try tx.userStatements.fetch("DELETE FROM users RETURNING id", []) }
        }
        #expect(try db.backend.readOnce { tx in try tx.maintenance.counts().users } == 0)
    }

    @Test func closingTheBackendFailsLaterCalls() throws {
        guard let db = try TestDatabase.make("connection_closed") else { return }
        db.backend.close()
        let error = try #require(throws: StorageError.self) { try db.backend.readOnce { tx in try tx.lastSeq() } }
        guard case .database(let failure) = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(failure.code == "08003")
    }
}
