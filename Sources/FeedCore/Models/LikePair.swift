/// A like as a pair of ids.
public struct LikePair: Sendable, Hashable, Codable {
    /// The user who likes the post.
    public let userID: String
    /// The liked post.
    public let postID: String

    /// Creates a pair.
    public init(userID: String, postID: String) {
        self.userID = userID
        self.postID = postID
    }
}
