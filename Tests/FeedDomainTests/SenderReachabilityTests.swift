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

/// Nothing the library hands out can be turned into a sender: a recursive `Mirror` walk from each public object —
/// in use, with subscribers attached and events delivered — reaches no subject, no subscriber and no closure that
/// would let outside code forge an event or a state.
// Blocks: waits for delivery (`waitForDelivery`).
@Suite(.ownThreads) struct SenderReachabilityTests {
    /// The service, and through it the store and the bridge with its sequencer.
    @Test func serviceAndBridgeReachNoSender() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let seen = Recorder(service.bridge.changes)
        let likes = Recorder(service.bridge.likePublisher)
        let result = try service.like(userID: "user1", postID: "post1")
        #expect(service.waitForDelivery(through: try #require(result.seq)))
        #expect(seen.values.count == 1 && likes.values.count == 1)
        let walker = SenderReachability()
        for (name, root) in [("service", service as Any), ("bridge", service.bridge), ("client", FeedClient.live(service))] {
            let report = walker.walk(root, name: name)
            #expect(report.findings.isEmpty, "\(report)")
            #expect(!report.truncated)
            #expect(report.visitedObjects > 1, "the walk must actually descend into \(name)")
        }
    }

    /// Projections, loaded, with state subscribers and after events; and their state publishers.
    @Test func projectionsReachNoSender() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        try withDependencies {
            $0.feedClient = .live(service)
        } operation: { () throws in
            let feed = FeedListProjection(viewerID: "user1")
            let detail = PostDetailProjection(postID: "post1", viewerID: "user1")
            let feedStates = Recorder(feed.state)
            let detailStates = Recorder(detail.state)
            feed.send(.refresh)
            detail.send(.load)
            detail.send(.like)
            let result = try service.like(userID: "user2", postID: "post1")
            #expect(service.waitForDelivery(through: try #require(result.seq)))
            #expect(feed(\.likedPostIDs) == ["post1"] && detail(\.likeCount) == 2)
            #expect(!feedStates.values.isEmpty && !detailStates.values.isEmpty)
            let walker = SenderReachability()
            let roots: [(String, Any)] = [
                ("feed", feed), ("detail", detail), ("feed.state", feed.state), ("detail.state", detail.state),
            ]
            for (name, root) in roots {
                let report = walker.walk(root, name: name)
                #expect(report.findings.isEmpty, "\(report)")
                #expect(!report.truncated)
            }
        }
    }

    /// A running change feed.
    @Test func changeFeedReachesNoSender() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let changeFeed = ChangeFeed(service: service)
        try changeFeed.start()
        defer { changeFeed.stop() }
        let errors = Recorder(changeFeed.errors)
        let report = SenderReachability().walk(changeFeed, name: "changeFeed")
        #expect(report.findings.isEmpty, "\(report)")
        #expect(!report.truncated)
        #expect(errors.values.isEmpty)
    }

    /// The walk is not vacuous: the same walker finds a subject held as a stored property, as a leaky bridge would.
    @Test func theWalkFindsAStoredSubject() {
        final class Leaky: Sendable {
            let changes = PassthroughPublisher<EventRecord, Never>()
        }
        let report = SenderReachability().walk(Leaky(), name: "leaky")
        #expect(report.findings.map(\.path) == ["leaky.changes"])
    }
}
