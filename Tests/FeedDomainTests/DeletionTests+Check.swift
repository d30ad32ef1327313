@testable import FeedDomain
import FeedCore
import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// `check`'s `no-trace` rule, on both backends: nothing names a user who does not exist or a deleted post.
extension DeletionTests {
    @Test(arguments: TestBackend.allCases)
    func checkFindsATracePlantedAfterTheFact(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.like(userID: "user2", postID: "post2")
        // A user whose row goes behind the product's back: the log still names them.
        try service.createUser(id: "ghost")
        try service.like(userID: "ghost", postID: "post1")
        try service.unlike(userID: "ghost", postID: "post1")
        #expect(try service.check().isEmpty)
        try service.executeSQL("DELETE FROM users WHERE id = 'ghost'")
        #expect(
            try service.check().map(\.description) == [#"no-trace: 3 events name user "ghost", who does not exist"#])

        // A replica client's record and rejection of a user who does not exist; a tombstone of a post that still
        // has its row and a like.
        try service.executeSQL(
            "INSERT INTO sync_clients (client_id, user_id, last_mutation, last_mutation_seq, updated_at) VALUES ('phone-1', 'gone', 0, 0, 0)"
        )
        try service.executeSQL("INSERT INTO sync_rejections (client_id, mutation, reason, at) VALUES ('phone-1', 1, 'postNotFound', 0)")
        try service.executeSQL("INSERT INTO sync_rejections (client_id, mutation, reason, at) VALUES ('lost', 1, 'postNotFound', 0)")
        try service.executeSQL("INSERT INTO deleted_posts (id, deleted_at) VALUES ('post2', 0)")
        #expect(
            try service.check().map(\.description) == [
                #"no-trace: 3 events name user "ghost", who does not exist"#,
                #"no-trace: 1 sync client record belongs to user "gone", who does not exist"#,
                #"no-trace: 1 sync rejection of client "lost", whose record or user does not exist"#,
                #"no-trace: 1 sync rejection of client "phone-1", whose record or user does not exist"#,
                #"no-trace: 1 like names post "post2", which was deleted"#,
                #"no-trace: post "post2" has a row but was deleted (it has a tombstone)"#,
            ])
    }

    @Test(arguments: TestBackend.allCases)
    func anErasureWithTokensAndReplicaClientsPassesCheck(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        try service.like(userID: "user2", postID: "post1")
        try service.like(userID: "user3", postID: "post1")
        _ = try service.issueToken(userID: "user2", label: "phone")
        try service.executeSQL(
            "INSERT INTO sync_clients (client_id, user_id, last_mutation, last_mutation_seq, updated_at) VALUES ('phone-2', 'user2', 1, 0, 0)"
        )
        try service.executeSQL("INSERT INTO sync_rejections (client_id, mutation, reason, at) VALUES ('phone-2', 1, 'postNotFound', 0)")
        try service.deletePost(postID: "post2", by: nil)
        #expect(try service.check().isEmpty)
        #expect(try service.deleteUser(userID: "user2").deleted)
        #expect(try service.deleteUser(userID: "user1").deleted)
        #expect(try service.check().map(\.description) == [])
        #expect(try service.firstColumn("SELECT client_id FROM sync_rejections").isEmpty)
    }
}
