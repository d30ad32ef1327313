/// What a like, unlike or toggle command did.
public struct LikeResult: Sendable, Hashable, Codable {
    /// The post.
    public let postID: String
    /// The acting user.
    public let userID: String
    /// Whether the user likes the post after the command.
    public let liked: Bool
    /// The post's like count after the command.
    public let likeCount: Int
    /// Whether the command changed anything; `false` for liking a liked post or unliking an unliked one.
    public let changed: Bool
    /// The event's seq when something changed, `nil` otherwise.
    public let seq: Int64?

    /// Creates a result.
    public init(postID: String, userID: String, liked: Bool, likeCount: Int, changed: Bool, seq: Int64?) {
        self.postID = postID
        self.userID = userID
        self.liked = liked
        self.likeCount = likeCount
        self.changed = changed
        self.seq = seq
    }
}
