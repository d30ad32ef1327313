import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// A like batch of several commands reads every command's keys, then locks the posts and the users in key order. A
/// row deleted between the read and the lock must not be liked: the batch is sent again and the unit naming it fails
/// as unknown, while the others apply.
// Blocks: the batch waits on the deleting transaction's row locks; waits on semaphores and joins threads.
@Suite(.ownThreads) struct BatchLockTests {
    private static func unit(_ action: LikeCommand.Action, _ user: String, _ post: String) -> LikeUnit {
        LikeUnit(operations: [LikeCommand(action, userID: user, postID: post)], at: testTime)
    }

    /// Runs `units` as one batch through ``PostgresBackend/commitLikes(_:join:afterCommit:)`` while `deletion` holds
    /// its rows in a transaction on another connection; the deletion commits once the batch waits for one of its locks.
    private static func batch(
        _ units: [LikeUnit], on db: TestDatabase, whileHeldBy deletion: @escaping @Sendable (PostgresTransaction) throws -> Void
    ) throws -> [Result<[LikeOutcome], StorageError>]? {
        let other = try PostgresBackend(url: db.url)
        defer { other.close() }
        let held = DispatchSemaphore(value: 0), commit = DispatchSemaphore(value: 0)
        let deleter = spawn("deleting transaction") {
            _ = try? write(other) { tx in
                try deletion(tx.pg)
                held.signal()
                _ = commit.wait(timeout: .now() + 30)
            }
        }
        guard waitFor(held, "the deleting transaction") else {
            commit.signal()
            join([deleter])
            return nil
        }
        let results = Shared<Result<[Result<[LikeOutcome], StorageError>], any Error>?>(nil)
        let liker = spawn("like batch") {
            let outcome = Result { try db.backend.commitLikes(units, join: { _ in [] }, afterCommit: { _ in }) }
            results.update { $0 = outcome }
        }
        let waiting = try waitUntil("the batch waits for a row lock") {
            try db.admin(
                """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = current_database() AND wait_event_type = 'Lock'
                  AND query LIKE '%feedsync_apply_likes_first_send%'
                """) == [[.integer(1)]]
        }
        #expect(waiting)
        commit.signal()
        join([deleter, liker])
        return try #require(results.current).get()
    }

    @Test func aPostDeletedWhileABatchWaitsToLockItFailsOnlyItsUnit() throws {
        guard let db = try TestDatabase.make("batch_lock_post") else { return }
        try seedUsersAndPost(db.backend, users: 3)
        try write(db.backend) { tx in _ = try tx.insertPost(id: "p2", authorID: "u3", body: "going", at: testTime) }
        let units = [Self.unit(.like, "u1", "p1"), Self.unit(.like, "u2", "p2")]

        let deletion: @Sendable (PostgresTransaction) throws -> Void = { tx in
            let outcome = try tx.deletePost(id: "p2", by: nil, at: testTime)
            #expect(outcome == .deleted(authorID: "u3"))
        }
        let results = try #require(try Self.batch(units, on: db, whileHeldBy: deletion))
        #expect(results.count == 2)
        #expect(try results[0].get().map(\.likeCount) == [1])
        #expect(throws: StorageError.postNotFound("p2")) { try results[1].get() }
        #expect(
            try db.admin(
                """
                SELECT (SELECT count(*) FROM likes), (SELECT like_count FROM posts WHERE id = 'p1'),
                       (SELECT like_count FROM users WHERE id = 'u2'), (SELECT count(*) FROM posts WHERE id = 'p2'),
                       (SELECT count(*) FROM events)
                """) == [[.integer(1), .integer(1), .integer(0), .integer(0), .integer(1)]])
    }

    @Test func aUserErasedWhileABatchWaitsToLockThemFailsOnlyTheirUnit() throws {
        guard let db = try TestDatabase.make("batch_lock_user") else { return }
        try seedUsersAndPost(db.backend, users: 3)
        let units = [Self.unit(.like, "u1", "p1"), Self.unit(.like, "u3", "p1")]

        let erasure: @Sendable (PostgresTransaction) throws -> Void = { tx in
            let erased = try tx.eraseUser(id: "u3", at: testTime)
            #expect(erased != nil)
        }
        let results = try #require(try Self.batch(units, on: db, whileHeldBy: erasure))
        #expect(results.count == 2)
        #expect(try results[0].get().map(\.likeCount) == [1])
        #expect(throws: StorageError.userNotFound("u3")) { try results[1].get() }
        #expect(
            try db.admin(
                """
                SELECT (SELECT count(*) FROM likes), (SELECT like_count FROM posts WHERE id = 'p1'),
                       (SELECT count(*) FROM users WHERE id = 'u3'), (SELECT count(*) FROM events)
                """) == [[.integer(1), .integer(1), .integer(0), .integer(1)]])
    }
}
