import FeedCore
import FeedPostgresBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// The transactional-outbox gap: a seq taken at insert is not commit order. With the event-log head lock, a later
/// appender waits for the earlier one, so readers never see a hole that fills in later.
// Blocks: appender threads hold the log on the PostgreSQL server while a reader waits; semaphores and joins.
@Suite(.ownThreads) struct OrderingTests {
    /// The sessions of the test database waiting for a lock.
    private func lockWaiters(_ db: TestDatabase) throws -> Int64 {
        try db.admin(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).first?.first?.integer ?? 0
    }

    @Test func aReaderNeverSeesAHoleOrASeqAppearBehindItsCursor() throws {
        guard let db = try TestDatabase.make("ordering_gap") else { return }
        let backend = db.backend
        try write(backend) { tx in
            _ = try tx.insertUser(id: "before", name: "", at: testTime)
            _ = try tx.appendEvent(kind: .userCreated, userID: "before", postID: nil, likeCount: nil, at: testTime)
        }

        let commits = Shared<[String]>([])
        let appended = DispatchSemaphore(value: 0)
        let releaseA = DispatchSemaphore(value: 0)
        let done = Shared(false)
        let failures = Shared<[String]>([])

        func appender(_ name: String, hold: Bool) -> DispatchGroup {
            spawn(name) {
                do {
                    try backend.write(
                        { tx throws in
                            _ = try tx.insertUser(id: name, name: "", at: testTime)
                            _ = try tx.appendEvent(kind: .userCreated, userID: name, postID: nil, likeCount: nil, at: testTime)
                            if hold {
                                appended.signal()
                                waitFor(releaseA, "the test to release A")
                            }
                        },
                        afterCommit: { _ in commits.update { $0.append(name) } })
                } catch {
                    failures.update { $0.append("\(name): \(error)") }
                }
            }
        }

        // The reader polls all along, remembering every seq it was given.
        let seen = Shared<[Int64]>([])
        let reader = spawn("reader") {
            var cursor: Int64 = 1
            let deadline = ContinuousClock.now + stallLimit
            var finished = false
            // Reads until the appenders are done, then once more.
            while !finished, ContinuousClock.now < deadline {
                finished = done.current
                do {
                    let events = try backend.readOnce { tx in try tx.events(after: cursor, limit: nil) }
                    for event in events {
                        if event.seq != cursor + 1 { failures.update { $0.append("reader got seq \(event.seq) after \(cursor)") } }
                        cursor = max(cursor, event.seq)
                    }
                    seen.update { $0 += events.map(\.seq) }
                } catch {
                    failures.update { $0.append("reader: \(error)") }
                    return
                }
            }
        }

        let a = appender("A", hold: true)
        guard waitFor(appended, "A to append") else { return }
        let b = appender("B", hold: false)
        let c = appender("C", hold: false)
        // B and C wait behind A's lock on the log head: A took seq 2 and has not committed.
        try waitUntil("B and C wait for A's head lock") { try lockWaiters(db) == 2 }
        #expect(commits.current.isEmpty)
        #expect(seen.current.isEmpty)
        #expect(try backend.readOnce { tx in try tx.lastSeq() } == 1)
        releaseA.signal()
        join([a, b, c])
        done.update { $0 = true }
        join([reader])

        #expect(failures.current.isEmpty)
        // Every appender committed. (The order of their `afterCommit` calls is not commit order: a thread may be
        // descheduled between its COMMIT and its callback — seen under ThreadSanitizer — which is why the domain's
        // sequencer accepts ranges in any order. Commit order is what the seqs below show: A's is the lowest, and
        // B and C were seen waiting for A's head lock above.)
        #expect(commits.current.sorted() == ["A", "B", "C"])
        #expect(seen.current == [2, 3, 4])
        try backend.read { tx throws in
            let events = try tx.events(after: 0, limit: nil)
            #expect(events.map(\.seq) == [1, 2, 3, 4])
            #expect(events[1].userID == "A")
            #expect(try tx.maintenance.invariantViolations().isEmpty)
        }
    }
}
