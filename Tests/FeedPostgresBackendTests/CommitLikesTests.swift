import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// `commitLikes` sends a like batch as one autocommit statement: one round trip, all of it or nothing, and applied once
/// however often it is sent.
// Blocks: a second send waits on the first one's row locks; waits on semaphores and joins threads.
@Suite(.ownThreads) struct CommitLikesTests {
    /// Round trips the server answered on the pool's one connection.
    private static func roundTrips(_ backend: PostgresBackend) throws -> Int {
        try backend.withConnection { $0.answeredRoundTrips }
    }

    private static func unit(_ action: LikeCommand.Action, _ user: String, _ post: String) -> LikeUnit {
        LikeUnit(operations: [LikeCommand(action, userID: user, postID: post)], at: testTime)
    }

    /// The rows a like batch touches, as the server has them: likes, the post's and the user's counts, the log head
    /// and the number of events.
    private static func state(_ db: TestDatabase) throws -> [[DatabaseValue]] {
        try db.admin(
            """
            SELECT (SELECT count(*) FROM likes), (SELECT like_count FROM posts WHERE id = 'p1'),
                   (SELECT like_count FROM users WHERE id = 'u2'), (SELECT last_seq FROM event_log_head),
                   (SELECT count(*) FROM events)
            """)
    }

    @Test func aLoneCommandIsOneRoundTripWhereATransactionIsThree() throws {
        var options = PostgresOptions()
        options.maximumConnections = 1
        guard let db = try TestDatabase.make("commit_likes_trips", options: options) else { return }
        try seedUsersAndPost(db.backend)
        // The first use of the statement on the connection prepares it (a round trip of its own).
        _ = try db.backend.commitLikes([Self.unit(.like, "u1", "p1")], join: { _ in [] }, afterCommit: { _ in })

        let before = try Self.roundTrips(db.backend)
        var delivered: [[Result<[LikeOutcome], StorageError>]] = []
        let outcomes = try db.backend.commitLikes(
            [Self.unit(.toggle, "u2", "p1")],
            join: { _ in
                Issue.record("commitLikes asked for more units: a statement already sent cannot take them")
                return []
            },
            afterCommit: { delivered.append($0) })
        #expect(try Self.roundTrips(db.backend) - before == 1)
        // A first send: the function that records the lane without reading it first.
        let lastStatement = """
            SELECT query FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE '%feedsync_apply_likes%'
            """
        let sent = try db.admin(lastStatement)
        #expect(sent.count == 1 && sent[0][0].text?.contains("feedsync_apply_likes_first_send(") == true, "\(sent)")
        let outcome = try #require(try outcomes.first?.get().first)
        #expect(outcome.liked && outcome.likeCount == 2)
        #expect(delivered.count == 1)
        // Committed: another connection sees it.
        #expect(try Self.state(db)[0][0] == .integer(2))

        // The same command in a transaction: BEGIN, the statement, COMMIT (once prepared there too).
        try write(db.backend) { tx in _ = try tx.applyLikes([Self.unit(.toggle, "u2", "p1")]) }
        let inTransaction = try Self.roundTrips(db.backend)
        try write(db.backend) { tx in _ = try tx.applyLikes([Self.unit(.toggle, "u2", "p1")]) }
        #expect(try Self.roundTrips(db.backend) - inTransaction == 3)

        // A connection idle for a while is used the same way: a batch sent on it can be sent again (below).
        let idle = try Self.roundTrips(db.backend)
        let afterIdle = try db.backend.commitLikes([Self.unit(.toggle, "u2", "p1")], join: { _ in [] }, afterCommit: { _ in })
        #expect(try Self.roundTrips(db.backend) - idle == 1)
        #expect(try afterIdle.first?.get().first?.liked == false)
    }

    /// Sends `units` as batch `batch` of `lane` in autocommit, as ``PostgresBackend/commitLikes(_:join:afterCommit:)``
    /// does, on a connection of `backend`: a first send, or a send of a batch that was sent before.
    private static func send(
        _ units: [LikeUnit], lane: String, batch: Int64, sentBefore: Bool, on backend: PostgresBackend
    ) throws -> [Result<[LikeOutcome], StorageError>] {
        try backend.withConnection { connection in
            let transaction = PostgresTransaction(connection: connection, access: .autocommit, location: backend.location)
            defer { transaction.invalidate() }
            return try transaction.applyLikes(units, lane: (lane, batch, sentBefore))
        }
    }

    @Test func aBatchSentAgainAnswersAsTheFirstTimeAndChangesNothing() throws {
        guard let db = try TestDatabase.make("commit_likes_again") else { return }
        try seedUsersAndPost(db.backend)
        let lane = UUID().uuidString.lowercased()
        let first = try Self.send([Self.unit(.toggle, "u2", "p1")], lane: lane, batch: 1, sentBefore: false, on: db.backend)
        let firstOutcome = try #require(try first.first?.get().first)
        #expect(firstOutcome.liked && firstOutcome.likeCount == 1 && firstOutcome.event?.seq == 1)
        let afterFirst = try Self.state(db)

        // The same batch again — as after a connection that broke before its answer came — toggles nothing.
        let again = try Self.send([Self.unit(.toggle, "u2", "p1")], lane: lane, batch: 1, sentBefore: true, on: db.backend)
        #expect(try again.first?.get() == [firstOutcome])
        #expect(try Self.state(db) == afterFirst)

        // The lane's next batch applies; an older one than its last is refused, and changes nothing.
        let next = try Self.send([Self.unit(.toggle, "u2", "p1")], lane: lane, batch: 2, sentBefore: false, on: db.backend)
        #expect(try next.first?.get().first?.liked == false)
        let afterNext = try Self.state(db)
        #expect(throws: StorageError.self) {
            try Self.send([Self.unit(.toggle, "u2", "p1")], lane: lane, batch: 1, sentBefore: true, on: db.backend)
        }
        #expect(try Self.state(db) == afterNext)
        // Sent as a first send, a batch its lane already holds (or has passed) is undone: FSB02, nothing changed.
        for batch: Int64 in [1, 2] {
            #expect {
                try Self.send([Self.unit(.toggle, "u2", "p1")], lane: lane, batch: batch, sentBefore: false, on: db.backend)
            } throws: { error in
                guard case .database(let failure) = error as? StorageError else { return false }
                return failure.code == "FSB02"
            }
        }
        #expect(try Self.state(db) == afterNext)

        // A failed batch records nothing: sent again, it runs again (and fails again).
        #expect(throws: StorageError.postNotFound("nothing")) {
            try Self.send([Self.unit(.like, "u1", "nothing")], lane: lane, batch: 3, sentBefore: false, on: db.backend)
        }
        let retried = try Self.send([Self.unit(.like, "u1", "p1")], lane: lane, batch: 3, sentBefore: true, on: db.backend)
        #expect(try retried.first?.get().first?.liked == true)
        #expect(try db.admin("SELECT batch FROM like_lanes WHERE lane = $1::uuid", [.text(lane)]) == [[.integer(3)]])
        // A new lane's first send creates it.
        let fresh = UUID().uuidString.lowercased()
        _ = try Self.send([Self.unit(.toggle, "u1", "p1")], lane: fresh, batch: 1, sentBefore: false, on: db.backend)
        #expect(try db.admin("SELECT batch FROM like_lanes WHERE lane = $1::uuid", [.text(fresh)]) == [[.integer(1)]])
    }

    /// A lane's stored results name an unknown user in a failed unit's message; erasing a user of that id later
    /// scrubs it there too, and the rest of the results stay for a resend.
    @Test func erasingAUserScrubsTheirIdFromALanesStoredResults() throws {
        guard let db = try TestDatabase.make("commit_likes_erased") else { return }
        try seedUsersAndPost(db.backend)
        let lane = UUID().uuidString.lowercased()
        let batch = [Self.unit(.like, "u1", "p1"), Self.unit(.like, "ghost-7f3a", "p1")]
        let outcomes = try Self.send(batch, lane: lane, batch: 1, sentBefore: false, on: db.backend)
        #expect(throws: StorageError.userNotFound("ghost-7f3a")) { try outcomes[1].get() }
        let stored = "SELECT results::text FROM like_lanes WHERE lane = $1::uuid"
        #expect(try db.admin(stored, [.text(lane)]).description.contains("ghost-7f3a"))

        try write(db.backend) { tx throws in
            _ = try tx.insertUser(id: "ghost-7f3a", name: "Ghost", at: testTime)
            #expect(try tx.deletion.eraseUser(id: "ghost-7f3a", at: testTime) != nil)
        }
        let scrubbed = try db.admin(stored, [.text(lane)]).description
        #expect(!scrubbed.contains("ghost-7f3a"))
        // The first unit's result is kept: the batch sent again answers as before and changes nothing.
        let again = try Self.send(batch, lane: lane, batch: 1, sentBefore: true, on: db.backend)
        #expect(try again[0].get() == outcomes[0].get())
    }

    @Test func aBatchSentAgainWhileItsFirstSendStillRunsWaitsAndAnswersFromIt() throws {
        guard let db = try TestDatabase.make("commit_likes_overlap") else { return }
        try seedUsersAndPost(db.backend)
        let other = try PostgresBackend(url: db.url)
        defer { other.close() }
        let lane = UUID().uuidString.lowercased()
        let units = [Self.unit(.toggle, "u2", "p1")]

        // The first send, inside a transaction held open: it has applied the batch and created the lane, uncommitted.
        let sent = DispatchSemaphore(value: 0), commit = DispatchSemaphore(value: 0)
        let firstOutcome = Shared<LikeOutcome?>(nil)
        let first = spawn("first send") {
            _ = try? write(other) { tx in
                let outcomes = try tx.pg.applyLikes(units, lane: (lane, 1, sentBefore: false))
                firstOutcome.update { $0 = try? outcomes.first?.get().first }
                sent.signal()
                _ = commit.wait(timeout: .now() + 30)
            }
        }
        #expect(waitFor(sent, "the first send"))
        // The second send waits for the first; once that commits, it undoes itself (FSB02) and, sent once more,
        // answers from the lane.
        let secondFailure = Shared<StorageError?>(nil)
        let second = spawn("second send") {
            do {
                _ = try Self.send(units, lane: lane, batch: 1, sentBefore: true, on: db.backend)
            } catch {
                secondFailure.update { $0 = error as? StorageError }
            }
        }
        let waiting = try waitUntil("the second send waits for a lock") {
            try db.admin(
                """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%feedsync_apply_likes_once%'
                """
            ) == [[.integer(1)]]
        }
        #expect(waiting)
        commit.signal()
        join([first, second])
        guard case .database(let failure)? = secondFailure.current else {
            Issue.record("the second send ended with \(String(describing: secondFailure.current))")
            return
        }
        #expect(failure.code == "FSB02")
        let again = try Self.send(units, lane: lane, batch: 1, sentBefore: true, on: db.backend)
        #expect(try again.first?.get().first == firstOutcome.current)
        #expect(try Self.state(db)[0][0] == .integer(1), "one like, applied once")
        #expect(try Self.state(db)[0][4] == .integer(1), "one event")
    }

    @Test func aLoneCommandThatFailsLeavesNothing() throws {
        guard let db = try TestDatabase.make("commit_likes_atomic") else { return }
        try seedUsersAndPost(db.backend)
        _ = try db.backend.commitLikes([Self.unit(.like, "u1", "p1")], join: { _ in [] }, afterCommit: { _ in })
        let before = try Self.state(db)
        // The event row is the last the statement writes (after the like row and both counts): a constraint that
        // refuses it fails the statement after everything else was written.
        try db.admin("ALTER TABLE events ADD CONSTRAINT refuse_u2 CHECK (user_id <> 'u2')")
        var committed = false
        #expect(throws: StorageError.self) {
            try db.backend.commitLikes([Self.unit(.like, "u2", "p1")], join: { _ in [] }, afterCommit: { _ in committed = true })
        }
        #expect(!committed)
        #expect(try Self.state(db) == before)
        // Unknown users and posts: refused, nothing written.
        #expect(throws: StorageError.userNotFound("nobody")) {
            try db.backend.commitLikes([Self.unit(.like, "nobody", "p1")], join: { _ in [] }, afterCommit: { _ in })
        }
        #expect(throws: StorageError.postNotFound("nothing")) {
            try db.backend.commitLikes([Self.unit(.toggle, "u1", "nothing")], join: { _ in [] }, afterCommit: { _ in })
        }
        #expect(try Self.state(db) == before)

        // A batch of several whose events cannot be appended (they are appended last, for the whole batch): the
        // statement fails and leaves nothing.
        #expect(throws: StorageError.self) {
            try db.backend.commitLikes(
                [Self.unit(.unlike, "u1", "p1"), Self.unit(.like, "u2", "p1")], join: { _ in [] }, afterCommit: { _ in })
        }
        #expect(try Self.state(db) == before)

        // A unit of a batch that fails by itself (an unknown post) fails alone; the others commit.
        try db.admin("ALTER TABLE events DROP CONSTRAINT refuse_u2")
        let outcomes = try db.backend.commitLikes(
            [Self.unit(.unlike, "u1", "p1"), Self.unit(.like, "u2", "nothing")], join: { _ in [] }, afterCommit: { _ in })
        #expect(try outcomes[0].get().first?.liked == false)
        #expect(throws: StorageError.postNotFound("nothing")) { try outcomes[1].get() }
        let after = try Self.state(db)
        #expect(after[0][0] == .integer(0) && after[0][1] == .integer(0) && after[0][2] == .integer(0))
        #expect(after[0][4] == .integer(2), "the first like's event and the unlike's")
    }
}
