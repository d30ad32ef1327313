public import FeedCore

/// One page of a viewer's feed: posts newest first, with like counts and which the viewer likes.
public struct FeedPage: Sendable, Hashable {
    /// The viewer, or `nil` for an anonymous feed (nothing is liked).
    public let viewerID: String?
    /// The posts with the viewer's like state, newest first.
    public let rows: [FeedRow]
    /// The cursor for the next (older) page, or `nil` when this page is the last.
    public let nextCursor: FeedCursor?

    /// Creates a page.
    public init(viewerID: String?, rows: [FeedRow], nextCursor: FeedCursor?) {
        self.viewerID = viewerID
        self.rows = rows
        self.nextCursor = nextCursor
    }

    /// The ids of the posts on this page that the viewer likes (seed 004's `likedPostIDs`).
    public var likedPostIDs: Set<String> {
        Set(rows.lazy.filter(\.liked).map(\.post.id))
    }
}

/// A post seen by a viewer: the detail view's data.
public struct PostDetail: Sendable, Hashable {
    /// The post with its like count.
    public let post: Post
    /// Whether the viewer likes it.
    public let liked: Bool

    /// Creates a detail.
    public init(post: Post, liked: Bool) {
        self.post = post
        self.liked = liked
    }
}
