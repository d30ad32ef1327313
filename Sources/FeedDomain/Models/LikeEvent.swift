/// A like or an unlike, as seed 004's `GlobalEventBridge.likePublisher` carries it.
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
