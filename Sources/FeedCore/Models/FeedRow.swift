/// One row of a feed page: a post and whether the viewer likes it.
public struct FeedRow: Sendable, Hashable, Codable {
    /// The post, with its like count.
    public var post: Post
    /// Whether the viewer likes the post.
    public var liked: Bool

    /// Creates a feed row.
    public init(post: Post, liked: Bool) {
        self.post = post
        self.liked = liked
    }
}
