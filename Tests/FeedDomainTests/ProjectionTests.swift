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

// Blocks: waits for delivery (`waitForDelivery`) and for projection states.
@Suite(.ownThreads) struct ProjectionTests {
    let t0 = Date(timeIntervalSince1970: 1_700_000_000)

    func post(_ id: String, likes: Int = 0, sequence: Int64) -> Post {
        Post(id: id, authorID: "user1", body: "b", createdAt: t0.addingTimeInterval(Double(sequence)), likeCount: likes, sequence: sequence)
    }

    // MARK: Pure reducers, fed events

    @Test func feedReducerAppliesLikeEventsWithoutReloading() {
        var state = FeedListProjection.State(viewerID: "user1")
        let page = FeedPage(
            viewerID: "user1",
            rows: [
                FeedRow(post: post("post2", sequence: 2), liked: false), FeedRow(post: post("post1", likes: 3, sequence: 1), liked: true),
            ], nextCursor: nil)
        #expect(FeedListProjection.reduce(&state, .pageLoaded(.success(page), replacing: true)).isEmpty)
        #expect(state.likedPostIDs == ["post1"])
        let liked = EventRecord(seq: 10, kind: .liked, userID: "user1", postID: "post2", likeCount: 1, at: t0)
        #expect(FeedListProjection.reduce(&state, .eventReceived(liked)).isEmpty)
        #expect(state.likedPostIDs == ["post1", "post2"])
        #expect(state.posts.first { $0.id == "post2" }?.likeCount == 1)
        // Someone else's unlike moves the count but not the viewer's liked set.
        let other = EventRecord(seq: 11, kind: .unliked, userID: "user9", postID: "post1", likeCount: 2, at: t0)
        _ = FeedListProjection.reduce(&state, .eventReceived(other))
        #expect(state.likedPostIDs == ["post1", "post2"])
        #expect(state.posts.first { $0.id == "post1" }?.likeCount == 2)
        // A repeated or older event is ignored.
        let stale = EventRecord(seq: 10, kind: .unliked, userID: "user1", postID: "post2", likeCount: 0, at: t0)
        _ = FeedListProjection.reduce(&state, .eventReceived(stale))
        #expect(state.likedPostIDs.contains("post2"))
        #expect(state.lastAppliedSeq == 11)
    }

    @Test func feedReducerAsksForNewPostsAndPages() {
        var state = FeedListProjection.State(viewerID: "user1", pageSize: 2)
        #expect(FeedListProjection.reduce(&state, .refresh) == [.loadPage(viewerID: "user1", cursor: nil, limit: 2, replacing: true)])
        #expect(state.isLoading)
        let created = EventRecord(seq: 1, kind: .postCreated, userID: "user2", postID: "post9", likeCount: nil, at: t0)
        #expect(FeedListProjection.reduce(&state, .eventReceived(created)) == [.loadPost(id: "post9", viewerID: "user1")])
        _ = FeedListProjection.reduce(&state, .pageLoaded(.failure(.userNotFound("user1")), replacing: true))
        #expect(state.lastError == .userNotFound("user1"))
        #expect(!state.isLoading)
    }

    @Test func detailReducerTurnsActionsIntoCommandsAndErrorsIntoState() {
        var state = PostDetailProjection.State(postID: "post2", viewerID: "user1")
        #expect(PostDetailProjection.reduce(&state, .like) == [.command(LikeCommand(.like, userID: "user1", postID: "post2"))])
        _ = PostDetailProjection.reduce(&state, .commandResponse(.failure(.postNotFound("post2"))))
        #expect(state.lastError == .postNotFound("post2"))
        var anonymous = PostDetailProjection.State(postID: "post2", viewerID: nil)
        #expect(PostDetailProjection.reduce(&anonymous, .toggle).isEmpty)
        #expect(anonymous.lastError != nil)
    }

    // MARK: The seed 004 flow against a real file

    @Test(arguments: TestBackend.allCases) func detailLikeShowsInEveryFeedOnceDelivered(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try withDependencies {
            $0.feedClient = .live(service)
        } operation: { () throws in
            let feed = FeedListProjection(viewerID: "user1")
            let otherViewersFeed = FeedListProjection(viewerID: "user2")
            feed.send(.refresh)
            otherViewersFeed.send(.refresh)
            #expect(feed(\.posts).map(\.id) == ["post3", "post2", "post1"])
            #expect(feed(\.likedPostIDs).isEmpty)

            let detail = PostDetailProjection(postID: "post2", viewerID: "user1")
            detail.send(.load)
            detail.send(.like)
            #expect(detail(\.liked))
            #expect(detail(\.likeCount) == 1)
            #expect(detail(\.lastError) == nil)
            // Back on the feed: updated by the event alone, once it was delivered.
            #expect(service.waitForDelivery(through: detail(\.lastAppliedSeq)))
            #expect(feed(\.likedPostIDs) == ["post2"])
            #expect(feed(\.posts).first { $0.id == "post2" }?.likeCount == 1)
            #expect(otherViewersFeed(\.likedPostIDs).isEmpty)
            #expect(otherViewersFeed(\.posts).first { $0.id == "post2" }?.likeCount == 1)

            detail.send(.unlike)
            #expect(service.waitForDelivery(through: detail(\.lastAppliedSeq)))
            #expect(feed(\.likedPostIDs).isEmpty)
            #expect(try service.check().isEmpty)

            // A failure reaches the state as a value.
            let missing = PostDetailProjection(postID: "post404", viewerID: "user1")
            missing.send(.load)
            #expect(missing(\.lastError) == .postNotFound("post404"))
            missing.send(.like)
            #expect(missing(\.lastError) == .postNotFound("post404"))
        }
    }

    @Test(arguments: TestBackend.allCases) func newPostAppearsAtTheTopOfLoadedFeeds(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try withDependencies {
            $0.feedClient = .live(service)
        } operation: { () throws in
            let feed = FeedListProjection(viewerID: "user1")
            feed.send(.refresh)
            try service.createPost(id: "post4", authorID: "user2", body: "new")
            #expect(service.waitForDelivery(through: try service.status().lastSeq))
            #expect(feed(\.posts).first?.id == "post4")
        }
    }

    @Test(arguments: TestBackend.allCases) func statePublisherStartsWithTheCurrentStateAndFollowsChanges(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try withDependencies {
            $0.feedClient = .live(service)
        } operation: { () throws in
            let feed = FeedListProjection(viewerID: "user1")
            let states = Recorder(feed.state)
            #expect(states.values.count == 1)
            feed.send(.refresh)
            // `value` is right when `send` returns; subscribers get the states moments later, in order.
            #expect(feed.state.value.posts.count == 3)
            #expect(states.wait { $0.last == feed.state.value })
            #expect(states.values.map(\.isLoading) == [false, true, false])
            let result = try service.like(userID: "user1", postID: "post1")
            #expect(service.waitForDelivery(through: try #require(result.seq)))
            #expect(feed.state.value.likedPostIDs == ["post1"])
            #expect(states.wait { $0.last?.likedPostIDs == ["post1"] })
        }
    }

    @Test func testClientIsAnEmptyInMemoryDatabase() throws {
        try withDependencies {
            $0.context = .test
        } operation: { () throws in
            @Dependency(\.feedClient) var client
            #expect(try client.feedPage(nil, nil, 10).rows.isEmpty)
            _ = try client.createUser("u", "")
            _ = try client.createPost("p", "u", "hi")
            #expect(try client.like("u", "p").likeCount == 1)
        }
    }

    @Test func previewClientIsSeeded() throws {
        try withDependencies {
            $0.context = .preview
        } operation: { () throws in
            @Dependency(\.feedClient) var client
            #expect(try client.feedPage("alice", nil, 10).rows.count == SampleData.demo.posts.count)
        }
    }
}

@Suite struct ActionStreamTests {
    enum ViewAction: Sendable, Equatable { case tapped, refresh }

    /// Seed 003's view: it knows only its weak listener.
    final class SomeView {
        weak var listener: (any ActionListener<ViewAction>)?
        func tapped() { listener?.send(action: .tapped) }
        func requestRefresh() { listener?.send(action: .refresh) }
    }

    @Test func actionsArriveInOrderAndTheStreamEndsWithItsSource() async {
        let view = SomeView()
        var adapter: ActionStreamAdapter<ViewAction>? = ActionStreamAdapter()
        view.listener = adapter
        let stream = adapter!.actions
        let consumer = Task {
            var seen: [ViewAction] = []
            for await action in stream { seen.append(action) }
            return seen
        }
        view.tapped()
        view.requestRefresh()
        view.tapped()
        adapter = nil
        #expect(view.listener == nil)
        view.tapped()  // the source is gone: nothing to deliver to
        #expect(await consumer.value == [.tapped, .refresh, .tapped])
    }
}
