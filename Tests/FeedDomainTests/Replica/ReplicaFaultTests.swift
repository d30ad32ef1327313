import FeedCore
import FeedDomain
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Replicas of several users write offline and sync through a network that drops requests, loses answers after the
/// source applied them, and delivers pushes twice, while the source takes writes of its own. After everyone syncs
/// on a healed network: every replica equals the source for its user, the source's counts equal its rows, every
/// mutation was applied once (no new post twice, the source's number for each client is the client's last), and
/// nothing was rejected.
// Blocks: waits for device threads under a watchdog and on a semaphore.
@Suite(.ownThreads) struct ReplicaFaultTests {
    @Test(arguments: TestBackend.allCases)
    func replicasBehindALossyNetworkConvergeWithEveryMutationAppliedOnce(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let world = try ReplicaWorld(in: dir, on: backend) else { return }
        defer { world.close() }
        for n in 3...8 { try world.source.createPost(id: "p\(n)", authorID: "bob", body: "post \(n)") }
        for user in ["dave", "erin"] { try world.source.createUser(id: user) }
        let users = ["alice", "bob", "carol"]
        var devices: [(replica: ReplicaWorld.Replica, lossy: LossyTransport, user: String)] = []
        for (index, user) in users.enumerated() {
            for device in ["phone", "laptop"] {
                let lossy = LossyTransport(inner: world.transport(for: user), seed: UInt64(index * 2 + devices.count + 1))
                let replica = try blocking { try await world.replica("\(user)-\(device)", of: user, transport: lossy) }
                devices.append((replica, lossy, user))
            }
        }
        let watchdog = Watchdog(stallTimeout: .seconds(30))
        let problems = LockedLog<String>()
        for (index, device) in devices.enumerated() {
            watchdog.spawn("device\(index)") { worker in
                var random = ConcurrencyStressTests.StressRandom(seed: UInt64(100 + index))
                for step in 0..<80 {
                    let post = "p\(1 + random.next(8))"
                    do {
                        switch random.next(10) {
                        case 0..<3:
                            worker.step("step \(step): toggle \(post)")
                            try device.replica.service.toggle(userID: device.user, postID: post)
                        case 3:
                            worker.step("step \(step): like \(post)")
                            try device.replica.service.like(userID: device.user, postID: post)
                        case 4:
                            worker.step("step \(step): unlike \(post)")
                            try device.replica.service.unlike(userID: device.user, postID: post)
                        case 5:
                            worker.step("step \(step): post")
                            try device.replica.service.createPost(authorID: device.user, body: "from device \(index) step \(step)")
                        default:
                            worker.step("step \(step): sync")
                            _ = try blocking { try await device.replica.sync.sync() }
                        }
                    } catch let error as SyncError where error.isTransient {
                        continue  // the network lost every try; the queue is kept
                    } catch {
                        problems.append("device\(index) step \(step): \(error)")
                    }
                }
            }
        }
        watchdog.spawn("source") { worker in
            var random = ConcurrencyStressTests.StressRandom(seed: 7)
            for step in 0..<150 {
                let user = ["dave", "erin"][random.next(2)]
                let post = "p\(1 + random.next(8))"
                worker.step("step \(step): \(user) toggles \(post) on the source")
                do { try world.source.toggle(userID: user, postID: post) } catch { problems.append("source: \(error)") }
            }
        }
        guard case .finished = watchdog.waitForWorkers() else {
            Issue.record(Comment(rawValue: watchdog.summary()))
            Watchdog.abandon([world.source])
            return
        }
        #expect(problems.values.isEmpty, "\(problems.values.prefix(5))")
        let faults = devices.map(\.lossy.faults).reduce(LossyTransport.Faults(), +)
        #expect(faults.dropped > 0 && faults.answersLost > 0 && faults.duplicated > 0, "the network injected every fault: \(faults)")

        for device in devices { device.lossy.heal() }
        for _ in 0..<2 {
            for device in devices { _ = try blocking { try await device.replica.sync.sync() } }
        }
        #expect(try world.source.check().isEmpty)
        for device in devices {
            try world.expectAgrees(device.replica)
            let status = try #require(try device.replica.service.replicaStatus())
            #expect(status.pendingChanges == 0 && status.rejectedChanges == 0)
            let made = try device.replica.service.firstColumn("SELECT seq FROM sqlite_sequence WHERE name = 'replica_mutations'")
            let applied = try world.source.backend.read { tx in
                try tx.userStatements.fetch("SELECT last_mutation FROM sync_clients WHERE client_id = $1", [.text(device.replica.clientID)])
            }
            #expect(applied.first?.first == made.first ?? .integer(0), "the source handled each of the client's numbers")
        }
        let posts = try world.source.feedPage(viewerID: nil, limit: 1000).rows.map(\.post.body)
        #expect(Set(posts).count == posts.count, "no post was created twice")
    }
}

/// A transport whose network fails: it drops requests, applies a request and loses the answer, or delivers a push
/// twice — each with a seeded chance — until healed.
final class LossyTransport: SyncTransport {
    struct Faults: Sendable, CustomStringConvertible {
        var dropped = 0, answersLost = 0, duplicated = 0

        static func + (a: Faults, b: Faults) -> Faults {
            Faults(dropped: a.dropped + b.dropped, answersLost: a.answersLost + b.answersLost, duplicated: a.duplicated + b.duplicated)
        }

        var description: String { "\(dropped) dropped, \(answersLost) answers lost, \(duplicated) duplicated" }
    }

    private struct State {
        var random: ConcurrencyStressTests.StressRandom
        var healed = false
        var faults = Faults()
    }

    let inner: any SyncTransport
    private let state: LockedValue<State>

    init(inner: any SyncTransport, seed: UInt64) {
        self.inner = inner
        state = LockedValue(State(random: ConcurrencyStressTests.StressRandom(seed: seed)))
    }

    var faults: Faults { state.withLock { $0.faults } }

    func heal() { state.withLock { $0.healed = true } }

    private enum Fate { case deliver, drop, loseAnswer, duplicate }

    private func fate() -> Fate {
        state.withLock { state in
            guard !state.healed else { return .deliver }
            switch state.random.next(20) {
            case 0..<3:
                state.faults.dropped += 1
                return .drop
            case 3..<6:
                state.faults.answersLost += 1
                return .loseAnswer
            case 6..<8:
                state.faults.duplicated += 1
                return .duplicate
            default:
                return .deliver
            }
        }
    }

    func push(_ request: PushRequest) async throws(SyncError) -> PushResponse {
        switch fate() {
        case .drop: throw .unavailable("dropped")
        case .loseAnswer:
            _ = try await inner.push(request)
            throw .unavailable("answer lost")
        case .duplicate:
            _ = try await inner.push(request)
            return try await inner.push(request)
        case .deliver: return try await inner.push(request)
        }
    }

    func pull(_ request: PullRequest) async throws(SyncError) -> PullResponse {
        switch fate() {
        case .drop: throw .unavailable("dropped")
        case .loseAnswer:
            _ = try await inner.pull(request)
            throw .unavailable("answer lost")
        case .duplicate, .deliver: return try await inner.pull(request)
        }
    }

    func waitForChanges(after seq: Int64, timeout: Duration) async throws(SyncError) {
        try await inner.waitForChanges(after: seq, timeout: timeout)
    }
}

/// Runs an async operation from a plain thread and waits for it (test workers are threads). The operation runs on
/// threads of its own, so a cooperative pool that blocked tests hold cannot starve it.
func blocking<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
    let result = LockedValue<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task(executorPreference: ThreadPerJobExecutor.shared) {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await operation()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}
