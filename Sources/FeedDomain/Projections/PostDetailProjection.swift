internal import FeedDependencies
internal import FeedPublishers
public import FeedCore

/// The detail screen of the feed/detail flow: one post, whether the viewer likes it, its count, and the like actions.
///
/// Like, unlike and toggle run as effects through the `feedClient` dependency and answer with
/// ``Action/commandResponse(_:)``: the detail's own state is right when ``send(_:)`` returns, and the committed event
/// reaches every feed projection on the same bridge when the bridge delivers it, moments later
/// (``EventBridge/waitForDelivery(through:timeout:)`` with ``State/lastAppliedSeq`` waits for that).
///
/// ```swift
/// let detail = PostDetailProjection(postID: "post2", viewerID: "user1")
/// detail.send(.load)
/// detail.send(.like)
/// detail(\.liked)        // true
/// detail(\.lastError)    // nil, or why the like failed
/// detail(\.isDeleted)    // true once the post was deleted: go back to the feed
/// ```
public final class PostDetailProjection: Sendable {
    /// Everything the detail view shows.
    public struct State: Sendable, Hashable {
        /// The post shown.
        public let postID: String
        /// The viewer acting on it.
        public var viewerID: String?
        /// The post, once loaded.
        public var post: Post?
        /// Whether the viewer likes it.
        public var liked = false
        /// Whether a load or command is in flight.
        public var isBusy = false
        /// The last failure, for the view to show.
        public var lastError: FeedError?
        /// The seq of the last event applied.
        public var lastAppliedSeq: Int64 = 0
        /// Whether the post was deleted while the view showed it (by its author, by the operator, or with its author's
        /// account): the view says so and goes back to the feed, which has already dropped the post.
        public var isDeleted = false

        /// A state with nothing loaded.
        public init(postID: String, viewerID: String?) {
            self.postID = postID
            self.viewerID = viewerID
        }

        /// The post's like count, 0 before it is loaded.
        public var likeCount: Int { post?.likeCount ?? 0 }
    }

    /// Everything that can happen to the detail view.
    public enum Action: Sendable, Hashable {
        /// Load the post.
        case load
        /// The post arrived (or failed).
        case loaded(Result<PostDetail, FeedError>)
        /// Like the post.
        case like
        /// Take the like back.
        case unlike
        /// Like or unlike, whichever applies.
        case toggle
        /// A like command finished (or failed).
        case commandResponse(Result<LikeResult, FeedError>)
        /// A committed change from the bridge.
        case eventReceived(EventRecord)
        /// The view showed the error.
        case dismissError
    }

    /// Work the reducer asks for.
    public enum Effect: Sendable, Hashable {
        /// Fetch the post.
        case load(postID: String, viewerID: String?)
        /// Run a like command.
        case command(LikeCommand)
    }

    private let loop: ActionLoop<State, Action, Effect>
    private let subscription: AnyCancellable

    /// Creates a detail projection and subscribes it to the client's bridge. Send ``Action/load`` to fetch.
    public init(postID: String, viewerID: String?) {
        @Dependency(\.feedClient) var client
        let loop = ActionLoop<State, Action, Effect>(
            initial: State(postID: postID, viewerID: viewerID),
            reduce: Self.reduce,
            run: { effect in Self.run(effect, client: client) })
        self.loop = loop
        subscription = client.bridge.changes.sink { [weak loop] event in
            loop?.send(.eventReceived(event))
        }
    }

    /// Reads one property of the state through a key path: `detail(\.liked)`.
    public func callAsFunction<Value>(_ keyPath: KeyPath<State, Value>) -> Value {
        loop.current[keyPath: keyPath]
    }

    /// The whole state as a read-only current-value publisher.
    public var state: StatePublisher<State> { loop.statePublisher }

    /// Applies an action, runs its effects and their answers, then returns.
    public func send(_ action: Action) {
        loop.send(action)
    }

    // MARK: - Reducer

    /// The pure reducer: applies `action` to `state` and returns the effects to run.
    public static func reduce(_ state: inout State, _ action: Action) -> [Effect] {
        switch action {
        case .load:
            state.isBusy = true
            return [.load(postID: state.postID, viewerID: state.viewerID)]
        case .loaded(.success(let detail)):
            state.isBusy = false
            state.lastError = nil
            state.post = detail.post
            state.liked = detail.liked
            return []
        case .loaded(.failure(let error)):
            state.isBusy = false
            state.lastError = error
            return []
        case .commandResponse(.failure(let error)):
            state.isBusy = false
            state.lastError = error
            // The post went while the command was on its way: the like failed with the unknown-post error.
            if case .postNotFound = error, state.post != nil { markDeleted(&state) }
            return []
        case .like, .unlike, .toggle:
            guard !state.isDeleted else {
                state.lastError = .postNotFound(state.postID)
                return []
            }
            guard let viewerID = state.viewerID else {
                state.lastError = .invalidValue(field: "user id", value: "", reason: "choose a user to like posts as (--user)")
                return []
            }
            let kind: LikeCommand.Action =
                switch action {
                case .like: .like
                case .unlike: .unlike
                default: .toggle
                }
            state.isBusy = true
            return [.command(LikeCommand(kind, userID: viewerID, postID: state.postID))]
        case .commandResponse(.success(let result)):
            state.isBusy = false
            state.lastError = nil
            state.liked = result.liked
            state.post?.likeCount = result.likeCount
            if let seq = result.seq, seq > state.lastAppliedSeq { state.lastAppliedSeq = seq }
            return []
        case .eventReceived(let event):
            guard event.seq > state.lastAppliedSeq, event.postID == state.postID else { return [] }
            state.lastAppliedSeq = event.seq
            if event.kind == .postDeleted {
                markDeleted(&state)
                return []
            }
            if let count = event.likeCount { state.post?.likeCount = count }
            if event.userID == state.viewerID, event.kind == .liked || event.kind == .unliked {
                state.liked = event.kind == .liked
            }
            return []
        case .dismissError:
            state.lastError = nil
            return []
        }
    }

    private static func markDeleted(_ state: inout State) {
        state.isDeleted = true
        state.liked = false
        state.post?.likeCount = 0
    }

    static func run(_ effect: Effect, client: FeedClient) -> Action? {
        switch effect {
        case .load(let postID, let viewerID):
            .loaded(Result { () throws(FeedError) in try client.post(postID, viewerID) })
        case .command(let command):
            .commandResponse(
                Result { () throws(FeedError) in
                    switch command.action {
                    case .like: try client.like(command.userID, command.postID)
                    case .unlike: try client.unlike(command.userID, command.postID)
                    case .toggle: try client.toggle(command.userID, command.postID)
                    }
                })
        }
    }
}
