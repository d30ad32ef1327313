internal import FeedSync

/// `like POST`, `unlike POST`, `toggle POST`.
struct LikeActionCommand: Sendable, Hashable {
    /// Which of the three.
    let action: LikeCommand.Action
    /// The post.
    let postID: String
}
