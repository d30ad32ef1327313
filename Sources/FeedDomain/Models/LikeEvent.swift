/// A like or an unlike, as ``EventBridge/likePublisher`` carries it: which post, and whether it is now liked.
public enum LikeEvent: Sendable, Hashable {
    /// A post was liked.
    case liked(postID: String)
    /// A like was taken back.
    case unliked(postID: String)

    /// The post concerned.
    public var postID: String {
        switch self {
        case .liked(let postID), .unliked(let postID): postID
        }
    }
}
