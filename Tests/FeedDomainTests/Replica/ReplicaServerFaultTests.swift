import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Replicas following a PostgreSQL source through a network partition and a server restart (`pg_ctl restart -m
/// immediate`): syncs fail with transient errors while the source is away, local writes keep working, and once it is
/// back every replica converges by itself — each write applied once.
// Blocks: starts, restarts and stops a private PostgreSQL server and waits for it.
@Suite(.ownThreads) struct ReplicaServerFaultTests {
    @Test func replicasFollowingAPostgresSourceSurviveAPartitionAndARestart() async throws {
        guard let serverParent = try PostgresFaultTests.restartableServerParent() else { return }
        let serverDir = serverParent + "/replica-restart-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let url = try PostgresFaultTests.script(["start", serverDir], timeout: 60)
        defer { _ = try? PostgresFaultTests.script(["stop", serverDir], timeout: 60) }
        let proxy = try FaultProxy(upstreamURL: url)
        defer { proxy.close() }
        let proxied = proxy.url(replacingPortOf: url)

        let dir = TemporaryDirectory()
        let source = try FeedService(location: url)
        defer { source.close() }
        for user in ["alice", "bob", "carol"] { try await source.createUser(id: user) }
        for n in 1...6 { try await source.createPost(id: "p\(n)", authorID: "carol", body: "post \(n)") }

        var options = FeedOpenOptions()
        options.responseTimeout = .seconds(2)
        let retry = ReplicaSync.RetryPolicy(attempts: 3, initialDelay: .milliseconds(20), maximumDelay: .milliseconds(200))
        var opened: [(service: FeedService, sync: ReplicaSync, user: String)] = []
        for (index, user) in ["alice", "alice", "bob"].enumerated() {
            let service = try FeedService(location: dir.file("r\(index).sqlite"))
            try service.makeReplica(of: proxied, userID: user, clientID: "client-\(index)")
            let sync = try ReplicaSync(
                replica: service, transport: InProcessSyncTransport(location: proxied, userID: user, options: options), retry: retry)
            _ = try await sync.sync()
            opened.append((service, sync, user))
        }
        let replicas = opened
        let followers = replicas.map { replica in Task(executorPreference: ThreadPerJobExecutor.shared) { try await replica.sync.follow() }
        }
        defer { for follower in followers { follower.cancel() } }

        // Writes on every side while the network breaks and the server restarts.
        var random = ConcurrencyStressTests.StressRandom(seed: 11)
        func writeRound(_ label: String) async throws {
            for (index, replica) in replicas.enumerated() {
                try await replica.service.toggle(userID: replica.user, postID: "p\(1 + random.next(6))")
                if random.next(3) == 0 { try await replica.service.createPost(authorID: replica.user, body: "\(label) from r\(index)") }
            }
        }
        try await writeRound("before")
        proxy.blackhole()
        try await writeRound("partitioned")
        // A sync now cannot reach the source: it fails as transient, and the local writes stay queued.
        let probe = try ReplicaSync(
            replica: replicas[0].service, transport: InProcessSyncTransport(location: proxied, userID: "alice", options: options),
            retry: .init(attempts: 1, initialDelay: .zero, maximumDelay: .zero))
        do {
            _ = try await probe.sync()
            Issue.record("a sync through the partition succeeded")
        } catch {
            #expect(error.isTransient, "\(error)")
        }
        #expect(try await replicas[0].service.replicaStatus()?.lastError?.contains("unavailable") == true)
        proxy.heal()
        proxy.resetAll()
        try await writeRound("healed")
        _ = try PostgresFaultTests.script(["restart", serverDir], timeout: 60)
        try await writeRound("restarted")

        // Everyone converges by itself.
        let converged = await holds(within: 60) {
            for replica in replicas {
                guard let status = try? await replica.service.replicaStatus(), status.pendingChanges == 0 else { return false }
            }
            return true
        }
        #expect(converged, "every replica's queue was confirmed")
        let head = try await source.status().lastSeq
        #expect(
            await holds(within: 30) {
                for replica in replicas where (try? await replica.service.replicaStatus()?.lastSyncedSeq) != head { return false }
                return true
            })
        for follower in followers { follower.cancel() }
        for follower in followers { try? await follower.value }
        #expect(try await source.check().isEmpty)
        for replica in replicas {
            let mine = try await replica.service.feedPage(viewerID: replica.user, limit: 1000).rows.map {
                "\($0.post.id) \($0.post.likeCount) \($0.liked)"
            }
            let theirs = try await source.feedPage(viewerID: replica.user, limit: 1000).rows.map {
                "\($0.post.id) \($0.post.likeCount) \($0.liked)"
            }
            #expect(Set(mine) == Set(theirs))
            #expect(try await replica.service.replicaStatus()?.rejectedChanges == 0)
        }
        let bodies = try await source.feedPage(viewerID: nil, limit: 1000).rows.map(\.post.body)
        #expect(Set(bodies).count == bodies.count, "no post was created twice")
    }
}
