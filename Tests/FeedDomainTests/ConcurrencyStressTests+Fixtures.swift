import FeedSync
import FeedCore
import FeedDependencies
import FeedDomain
import FeedPublishers
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// MARK: - Fixtures

extension ConcurrencyStressTests {
    /// The run's sizes, scaled by `FEEDSYNC_STRESS_SCALE`.
    struct StressSize: Sendable, CustomStringConvertible {
        let scale: Double
        let uiThreads = 3
        let commandThreads = 2
        let users = 8
        let posts = 12
        let seededLikes = 30
        let pageSize = 5
        let feedViewers = ["user1", "user2", "user3"]
        let detailScreens: [(post: String, viewer: String)] = [
            ("post1", "user1"), ("post2", "user2"), ("post3", "user3"), ("post1", "user2"), ("post4", "user1"), ("post5", "user3"),
        ]
        let childRate = 1200

        var uiActions: Int { scaled(12_000) }
        var commands: Int { scaled(8000) }
        var childWrites: Int { scaled(8000) }

        func scaled(_ base: Int) -> Int { max(1, Int((Double(base) * scale).rounded())) }

        static func fromEnvironment() -> StressSize {
            let text = ProcessInfo.processInfo.environment["FEEDSYNC_STRESS_SCALE"] ?? ""
            guard let scale = Double(text), scale > 0, scale.isFinite else { return StressSize(scale: 1) }
            return StressSize(scale: scale)
        }

        var description: String {
            "scale \(scale) (FEEDSYNC_STRESS_SCALE): \(uiThreads) UI threads × \(uiActions) actions over \(feedViewers.count) feed "
                + "and \(detailScreens.count) detail projections, \(commandThreads) command threads × \(commands) commands, "
                + "a child agent-writer with \(childWrites) toggles at \(childRate)/s, a ChangeFeed and an app subscriber "
                + "acting from inside deliveries; \(users) users, \(posts) posts"
        }
    }

    /// A feed list screen, its label for reports, and a view observing its state.
    struct FeedScreen: Sendable {
        let viewerID: String
        let label: String
        let projection: FeedListProjection
        /// The events the state went through, as the observing view saw them.
        let applied = AppliedTrail()
        private let observation: AnyCancellable

        /// Creates the projection; call inside `withDependencies` with the live client.
        init(viewerID: String, pageSize: Int) {
            self.viewerID = viewerID
            label = "feed[\(viewerID)]"
            projection = FeedListProjection(viewerID: viewerID, pageSize: pageSize)
            observation = projection.state.sink { [applied] in applied.note($0.lastAppliedSeq) }
        }
    }

    /// A detail screen, its label for reports, and a view observing its state.
    struct DetailScreen: Sendable {
        let postID: String
        let viewerID: String
        let label: String
        let projection: PostDetailProjection
        /// The events the state went through, as the observing view saw them.
        let applied = AppliedTrail()
        private let observation: AnyCancellable

        /// Creates the projection; call inside `withDependencies` with the live client.
        init(postID: String, viewerID: String) {
            self.postID = postID
            self.viewerID = viewerID
            label = "detail[\(postID)/\(viewerID)]"
            projection = PostDetailProjection(postID: postID, viewerID: viewerID)
            observation = projection.state.sink { [applied] in applied.note($0.lastAppliedSeq) }
        }
    }

    /// The successive `lastAppliedSeq` values of a projection's published states: which events it applied, in order.
    ///
    /// `@unchecked Sendable`: `seqs` is only touched while `condition` is locked.
    final class AppliedTrail: @unchecked Sendable {
        private let condition = NSCondition()
        private var seqs: [Int64] = []

        func note(_ seq: Int64) {
            condition.lock()
            if seq != (seqs.last ?? 0) { seqs.append(seq) }
            condition.broadcast()
            condition.unlock()
        }

        var values: [Int64] {
            condition.lock()
            defer { condition.unlock() }
            return seqs
        }

        /// The trail once the view got the state that applied `seq` (states reach subscribers moments after they are
        /// reduced, on the projection's executor), or as it is after `seconds`.
        func values(through seq: Int64, seconds: Double = 30) -> [Int64] {
            let deadline = Date(timeIntervalSinceNow: seconds)
            condition.lock()
            defer { condition.unlock() }
            while (seqs.last ?? 0) < seq, condition.wait(until: deadline) {}
            return seqs
        }
    }

    /// One event as the app subscriber saw it.
    struct Delivery: Sendable {
        let seq: Int64
        let thread: String
    }

    /// What the quiescence step found.
    struct Verdict: Sendable {
        let screens: [String]
        let log: [Int64]
        let invariants: [String]
    }

    /// SplitMix64: a small deterministic generator, one per thread.
    struct StressRandom {
        private var state: UInt64

        init(seed: UInt64) { state = seed }

        mutating func next(_ bound: Int) -> Int {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
    }
}
