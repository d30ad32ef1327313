import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// `commitLikes` commits a like batch whole or leaves nothing, even when it fails after writing rows.
@Suite(.ownThreads) struct CommitLikesTests {
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
