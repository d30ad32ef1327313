import FeedSync
import FeedTestSupport
import Foundation
import Testing

/// Deletions reach a replica through `sync`: a post deleted on the source leaves the replica, a queued like of it is
/// rejected, and a replica whose account was erased gets one line and status 65 with its file left as it was.
extension ReplicaCLITests {
    @Test(arguments: TestBackend.allCases)
    func aDeletedPostLeavesTheReplicaAndItsQueuedLikeIsRejected(on backend: TestBackend) throws {
        guard let source = try makeSource(on: backend) else { return }
        try initReplica(from: source)
        for post in ["post3", "post4"] { try #require(try feedsync(replica, "like", post).status == 0) }
        try #require(try feedsync(source, "post", "delete", "post4").status == 0)
        let synced = try feedsync(replica, "sync", "--json")
        #expect(synced.status == 0, "\(synced.stderr)")
        let report = try json(synced.stdout)
        #expect(report["pushed"] as? Int == 2 && report["rejected"] as? Int == 1 && report["pendingChanges"] as? Int == 0)
        #expect(try post("post3", on: source, as: "alice") == (true, 1))
        let shown = try feedsync(replica, "show", "post4")
        expectOneLineFailure(shown, status: 65)
        #expect(try status(replica)["rejectedChanges"] as? Int == 1)
    }

    @Test(arguments: TestBackend.allCases)
    func syncOfAnErasedAccountIs65InOneLineAndWritesNothing(on backend: TestBackend) throws {
        guard let source = try makeSource(on: backend) else { return }
        try initReplica(from: source)
        try #require(try feedsync(replica, "like", "post1").status == 0)
        try #require(try feedsync(source, "user", "delete", "alice").status == 0)
        let before = try #require(fileBytes(replica))
        for arguments in [["sync"], ["sync", "--json"], ["sync", "--follow"]] {
            let refused = try CLIRun.run(["--db", replica] + arguments, environment: environment())
            expectOneLineFailure(refused, status: 65)
            #expect(refused.stderr.contains(#"the source has no account "alice": it was erased, or never existed"#), "\(refused.stderr)")
            #expect(refused.stderr.contains("remove \"") && refused.stderr.contains("replica.sqlite\" to delete it"), "\(refused.stderr)")
            #expect(fileBytes(replica) == before, "\(arguments): the replica's file changed")
        }
        #expect(!FileManager.default.fileExists(atPath: replica + "-wal"))
        #expect(try status(replica)["pendingChanges"] as? Int == 1)
    }
}
