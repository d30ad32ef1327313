internal import FeedDependencies
internal import FeedPublishers
public import FeedCore

/// The feed list of the feed/detail flow, made durable: a viewer's pages of posts, like counts and liked posts, kept current
/// by applying committed events.
///
/// State is private: read it with ``callAsFunction(_:)`` through a key path — `feed(\.likedPostIDs)` — or subscribe to
/// ``state``. It changes only through ``send(_:)``. Database work runs as effects through the `feedClient`
/// dependency and answers with an action carrying a `Result`, so a failure lands in ``State/lastError``.
///
/// ```swift
/// let feed = FeedListProjection(viewerID: "user1")
/// feed.send(.refresh)
/// feed(\.posts).map(\.id)          // newest first
/// feed(\.likedPostIDs)             // ["post2"] once post2 was liked anywhere in this process
/// ```
///
/// Every like committed through the same ``EventBridge`` — from a detail projection, the CLI's service or another
/// process's change read by the sync feed — is applied to the loaded posts when the bridge delivers it, on the
/// projection's own bridge queue (``EventBridge/waitForDelivery(through:timeout:)`` waits for that): the count comes
/// from the event, nothing is re-read. A created post is read on that queue too, so the read holds up no other
/// subscriber.
public final class FeedListProjection: Sendable {
    /// Everything the feed list shows.
    public struct State: Sendable, Hashable {
        /// The viewer whose likes are shown, or `nil` for an anonymous feed.
        public var viewerID: String?
        /// The loaded posts, newest first.
        public var posts: [Post] = []
        /// The posts the viewer likes, among those seen (shown with ❤️).
        public var likedPostIDs: Set<String> = []
        /// Where the next page starts, or `nil` when the last page was loaded.
        public var nextCursor: FeedCursor?
        /// Posts per page.
        public var pageSize: Int
        /// Whether a page load is in flight.
        public var isLoading = false
        /// The last failure, for the view to show.
        public var lastError: FeedError?
        /// The seq of the last event applied; older or repeated events are ignored.
        public var lastAppliedSeq: Int64 = 0

        /// A state with nothing loaded.
        public init(viewerID: String?, pageSize: Int = 20) {
            self.viewerID = viewerID
            self.pageSize = pageSize
        }
    }

    /// Everything that can happen to the feed list.
    public enum Action: Sendable, Hashable {
        /// Load the first page again.
        case refresh
        /// Load the page after the loaded ones.
        case loadMore
        /// A page arrived (or failed); `replacing` drops the loaded posts first.
        case pageLoaded(Result<FeedPage, FeedError>, replacing: Bool)
        /// A newly created post arrived (or failed).
        case postLoaded(Result<PostDetail, FeedError>)
        /// A committed change from the bridge.
        case eventReceived(EventRecord)
        /// The view showed the error.
        case dismissError
    }

    /// Work the reducer asks for.
    public enum Effect: Sendable, Hashable {
        /// Fetch a page.
        case loadPage(viewerID: String?, cursor: FeedCursor?, limit: Int, replacing: Bool)
        /// Fetch one post.
        case loadPost(id: String, viewerID: String?)
    }

    private let loop: ActionLoop<State, Action, Effect>
    private let subscription: AnyCancellable

    /// Creates a feed list for `viewerID` and subscribes it to the client's bridge. Nothing is loaded until
    /// ``Action/refresh`` is sent.
    public init(viewerID: String?, pageSize: Int = 20) {
        @Dependency(\.feedClient) var client
        let loop = ActionLoop<State, Action, Effect>(
            initial: State(viewerID: viewerID, pageSize: pageSize),
            reduce: Self.reduce,
            run: { effect in Self.run(effect, client: client) })
        self.loop = loop
        subscription = client.bridge.changes.sink { [weak loop] event in
            loop?.send(.eventReceived(event))
        }
    }

    /// Reads one property of the state through a key path: `feed(\.likedPostIDs)`.
    public func callAsFunction<Value>(_ keyPath: KeyPath<State, Value>) -> Value {
        loop.current[keyPath: keyPath]
    }

    /// The whole state as a read-only current-value publisher.
    public var state: StatePublisher<State> { loop.statePublisher }

    /// Applies an action, runs the effects it asks for and applies their answers, then returns.
    public func send(_ action: Action) {
        loop.send(action)
    }

    // MARK: - Reducer

    /// The pure reducer: applies `action` to `state` and returns the effects to run.
    public static func reduce(_ state: inout State, _ action: Action) -> [Effect] {
        switch action {
        case .refresh:
            state.isLoading = true
            return [.loadPage(viewerID: state.viewerID, cursor: nil, limit: state.pageSize, replacing: true)]
        case .loadMore:
            guard let cursor = state.nextCursor, !state.isLoading else { return [] }
            state.isLoading = true
            return [.loadPage(viewerID: state.viewerID, cursor: cursor, limit: state.pageSize, replacing: false)]
        case .pageLoaded(.success(let page), let replacing):
            state.isLoading = false
            state.lastError = nil
            if replacing {
                state.posts = []
            }
            let known = Set(state.posts.map(\.id))
            state.posts += page.rows.map(\.post).filter { !known.contains($0.id) }
            for row in page.rows {
                if row.liked { state.likedPostIDs.insert(row.post.id) } else { state.likedPostIDs.remove(row.post.id) }
            }
            state.nextCursor = page.nextCursor
            return []
        case .pageLoaded(.failure(let error), _):
            state.isLoading = false
            state.lastError = error
            return []
        case .postLoaded(.success(let detail)):
            guard !state.posts.contains(where: { $0.id == detail.post.id }) else { return [] }
            // Only a post newer than the newest loaded one belongs at the top; older ones arrive with their page.
            if let newest = state.posts.first, (detail.post.createdAt, detail.post.sequence) < (newest.createdAt, newest.sequence) {
                return []
            }
            state.posts.insert(detail.post, at: 0)
            if detail.liked { state.likedPostIDs.insert(detail.post.id) }
            return []
        case .postLoaded(.failure(let error)):
            state.lastError = error
            return []
        case .eventReceived(let event):
            guard event.seq > state.lastAppliedSeq else { return [] }
            state.lastAppliedSeq = event.seq
            return apply(event, to: &state)
        case .dismissError:
            state.lastError = nil
            return []
        }
    }

    private static func apply(_ event: EventRecord, to state: inout State) -> [Effect] {
        guard let postID = event.postID else { return [] }
        switch event.kind {
        case .liked, .unliked, .likeCountChanged:
            if let index = state.posts.firstIndex(where: { $0.id == postID }), let count = event.likeCount {
                state.posts[index].likeCount = count
            }
            if event.kind != .likeCountChanged, event.userID == state.viewerID {
                if event.kind == .liked { state.likedPostIDs.insert(postID) } else { state.likedPostIDs.remove(postID) }
            }
            return []
        case .postCreated:
            return [.loadPost(id: postID, viewerID: state.viewerID)]
        case .postDeleted:
            state.posts.removeAll { $0.id == postID }
            state.likedPostIDs.remove(postID)
            return []
        case .userCreated, .userDeleted:
            return []
        }
    }

    static func run(_ effect: Effect, client: FeedClient) -> Action? {
        switch effect {
        case .loadPage(let viewerID, let cursor, let limit, let replacing):
            .pageLoaded(Result { () throws(FeedError) in try client.feedPage(viewerID, cursor, limit) }, replacing: replacing)
        case .loadPost(let id, let viewerID):
            .postLoaded(Result { () throws(FeedError) in try client.post(id, viewerID) })
        }
    }
}
