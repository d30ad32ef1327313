import FeedDomain
@testable import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// Deletions reach a replica of a `feedsync serve`: a deleted post leaves it on the next sync; an erased user's token
/// is gone with the account, so their replica's sync is refused (65, one line); and a server that authenticates users
/// itself answers an account it does not have with `accountNotFound`, which the transport reads back.
extension ReplicaOverHTTPTests {
    @Test func aDeletedPostLeavesAnHTTPReplicaAndAnErasedUsersSyncIsRefused() throws {
        guard let server = try Server(on: .sqlite) else { return }
        defer { server.stop() }
        let token = try server.token(for: "alice")
        let replica = server.dir.file("phone.sqlite")
        let made = try server.feedsync("--db", replica, "replica", "init", "--from", server.url, "--user", "alice", "--token", token)
        try #require(made.status == 0, "\(made.stderr)")
        #expect(try server.feedsync("--db", replica, "like", "p2").status == 0)
        #expect(try server.feedsync("--db", server.location, "post", "delete", "p1").status == 0)
        let synced = try server.feedsync("--db", replica, "sync", "--json")
        #expect(synced.status == 0 && synced.stdout.contains(#""pushed":1"#), "\(synced.stderr)")
        #expect(try server.feedsync("--db", replica, "show", "p1").status == 65, "the deleted post left the replica")

        #expect(try server.feedsync("--db", replica, "like", "p1").status == 65)
        #expect(try server.feedsync("--db", server.location, "user", "delete", "alice").status == 0)
        let refused = try server.feedsync("--db", replica, "sync")
        #expect(refused.status == 65, "\(refused.stderr)")
        #expect(refused.stderr.split(separator: "\n").count == 1)
        #expect(refused.stderr.contains("or its account was erased"), "\(refused.stderr)")
        #expect(try server.feedsync("--db", replica, "status", "--json").stdout.contains(#""pendingChanges":0"#))
    }

    @Test func anAccountTheServerDoesNotHaveIsReadBackAsAccountNotFound() async throws {
        let dir = TemporaryDirectory()
        let source = try FeedService(location: dir.file("source.sqlite"))
        defer { source.close() }
        let answer = await SyncEndpoint(service: source).respond(
            to: .pull, body: Data(#"{"version":3,"clientID":"c1","bulkGeneration":0}"#.utf8), userID: "alice")
        #expect(answer.status == 403)
        #expect(HTTPSyncTransport.error(status: Int(answer.status), body: answer.body) == .accountNotFound(userID: "", replica: nil))
    }
}
