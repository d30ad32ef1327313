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

/// A like command, for running several in one transaction with ``FeedService/perform(_:)``.
public struct LikeCommand: Sendable, Hashable {
    /// What the command does.
    public enum Action: String, Sendable, Hashable, CaseIterable {
        /// Like the post (idempotent).
        case like
        /// Take the like back (idempotent).
        case unlike
        /// Like when not liked, unlike when liked.
        case toggle
    }

    /// What to do.
    public let action: Action
    /// The acting user.
    public let userID: String
    /// The post.
    public let postID: String

    /// Creates a command.
    public init(_ action: Action, userID: String, postID: String) {
        self.action = action
        self.userID = userID
        self.postID = postID
    }
}
