internal import FeedSync

/// The interactive flow of seed 004 in a terminal: a feed list, a detail view with like actions, and back — the
/// feed already shows the change because both projections hang off the same ``EventBridge``.
///
/// Input arrives as ``AppAction``s through an ``ActionStreamAdapter`` and is consumed with `for await` (seed 003).
/// Create it inside `withDependencies { $0.feedClient = .live(service) }` so the projections use the database.
final class AppSession {
    private let viewerID: String
    private let feed: FeedListProjection
    /// The projections' bridge: after a like, the session waits until it reached the feed before it shows anything.
    private let bridge: EventBridge
    private let output: AppOutput
    private var screen = AppScreen.feed

    /// A session for `viewerID` showing `pageSize` posts per page.
    init(viewerID: String, pageSize: Int, output: AppOutput) {
        self.viewerID = viewerID
        self.output = output
        feed = FeedListProjection(viewerID: viewerID, pageSize: pageSize)
        @Dependency(\.feedClient) var client
        bridge = client.bridge
    }

    /// Loads and shows the feed, then handles actions until `quit` or the end of `actions`.
    func run(_ actions: AsyncStream<AppAction>) async {
        feed.send(.refresh)
        showFeed()
        output.prompt()
        for await action in actions {
            if handle(action) == false { break }
            output.prompt()
        }
        output.finish()
    }

    /// Handles one action; returns `false` for quit.
    private func handle(_ action: AppAction) -> Bool {
        // The open post was deleted meanwhile: say so and go back to the feed, which has already dropped it.
        if case .detail(let detail) = screen, detail(\.isDeleted) {
            leave(deleted: detail)
            if [.like, .unlike, .toggle, .back].contains(action) { return true }
        }
        switch action {
        case .quit:
            return false
        case .help:
            output.lines(["Commands:"] + AppAction.helpLines.map { "  " + $0 })
        case .invalid(let message):
            output.error("Error: " + message)
        case .showFeed:
            screen = .feed
            feed.send(.refresh)
            showFeed()
        case .back:
            screen = .feed
            showFeed()
        case .more:
            guard feed(\.nextCursor) != nil else {
                output.error("Error: no more posts. Type 'feed' to reload.")
                return true
            }
            screen = .feed
            feed.send(.loadMore)
            showFeed()
        case .open(let postID):
            let detail = PostDetailProjection(postID: postID, viewerID: viewerID)
            detail.send(.load)
            if let error = detail(\.lastError) {
                output.error(CLIError(error).message)
                return true
            }
            screen = .detail(detail)
            showDetail(detail)
        case .like, .unlike, .toggle:
            guard case .detail(let detail) = screen else {
                output.error("Error: open a post first, such as 'open post1'.")
                return true
            }
            detail.send(action == .like ? .like : action == .unlike ? .unlike : .toggle)
            // The feed learns of the change on its bridge queue: 'back' shows it once it arrived.
            bridge.waitForDelivery(through: detail(\.lastAppliedSeq))
            if detail(\.isDeleted) {
                leave(deleted: detail)
                return true
            }
            if let error = detail(\.lastError) {
                output.error(CLIError(error).message)
                detail.send(.dismissError)
            }
            showDetail(detail)
        }
        return true
    }

    private func leave(deleted detail: PostDetailProjection) {
        output.error("Error: post \(FeedError.quoted(detail(\.postID))) was deleted. Back to the feed.")
        screen = .feed
        showFeed()
    }

    private func showFeed() {
        if let error = feed(\.lastError) {
            output.error(CLIError(error).message)
            feed.send(.dismissError)
        }
        let posts = feed(\.posts)
        var lines = [
            output.style.bold("Feed for \(TextSanitizer.clean(viewerID))") + " (\(posts.count) posts; 'open POST', 'more', 'help')"
        ]
        lines += posts.isEmpty ? ["(no posts)"] : TextShapes.feed(posts: posts, liked: feed(\.likedPostIDs), style: output.style)
        output.lines(lines)
    }

    private func showDetail(_ detail: PostDetailProjection) {
        guard let post = detail(\.post) else { return }
        output.lines(TextShapes.detail(post, liked: detail(\.liked), style: output.style) + ["('like', 'unlike', 'toggle', 'back')"])
    }
}
