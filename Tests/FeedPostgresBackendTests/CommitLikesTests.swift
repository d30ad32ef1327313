import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// `commitLikes` sends a like batch as one autocommit statement: one round trip, and all of it or nothing.
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
        let outcome = try #require(try outcomes.first?.get().first)
        #expect(outcome.liked && outcome.likeCount == 2)
        #expect(delivered.count == 1)
        // Committed: another connection sees it.
        #expect(try Self.state(db)[0][0] == .integer(2))

        // The same command in a transaction: BEGIN, the statement, COMMIT.
        let inTransaction = try Self.roundTrips(db.backend)
        try write(db.backend) { tx in _ = try tx.applyLikes([Self.unit(.toggle, "u2", "p1")]) }
        #expect(try Self.roundTrips(db.backend) - inTransaction == 3)

        // A connection the server has not answered for over a second may be gone without a trace: its first round
        // trip is BEGIN, which can be repeated on a new connection, not a statement that commits by itself.
        usleep(1_100_000)  // the scenario: an idle connection, not a wait for an event
        let idle = try Self.roundTrips(db.backend)
        let afterIdle = try db.backend.commitLikes([Self.unit(.toggle, "u2", "p1")], join: { _ in [] }, afterCommit: { _ in })
        #expect(try Self.roundTrips(db.backend) - idle == 3)
        #expect(try afterIdle.first?.get().first?.liked == true)
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
