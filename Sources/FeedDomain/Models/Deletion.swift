/// What ``FeedService/deletePost(postID:by:)-17b9k`` did.
public struct PostDeletion: Sendable, Hashable, Codable {
    /// The post.
    public let postID: String
    /// Whether this call deleted it; `false` when it was deleted before (nothing changed).
    public let deleted: Bool
    /// The `postDeleted` event's seq when this call deleted the post, `nil` otherwise.
    public let seq: Int64?

    /// Creates a result.
    public init(postID: String, deleted: Bool, seq: Int64?) {
        self.postID = postID
        self.deleted = deleted
        self.seq = seq
    }
}

/// What ``FeedService/deleteUser(userID:)-6te1m`` did.
public struct UserErasure: Sendable, Hashable, Codable {
    /// The user.
    public let userID: String
    /// Whether this call erased the user; `false` when no user has this id (never created, or erased before: an
    /// erased id leaves no trace to tell the two apart).
    public let deleted: Bool
    /// How many of the user's posts were deleted with it.
    public let deletedPosts: Int
    /// How many likes of the user on other posts were taken back.
    public let removedLikes: Int
    /// The `userDeleted` event's seq when this call erased the user, `nil` otherwise.
    public let seq: Int64?

    /// Creates a result.
    public init(userID: String, deleted: Bool, deletedPosts: Int, removedLikes: Int, seq: Int64?) {
        self.userID = userID
        self.deleted = deleted
        self.deletedPosts = deletedPosts
        self.removedLikes = removedLikes
        self.seq = seq
    }
}
