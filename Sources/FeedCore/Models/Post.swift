public import Foundation

/// A post in the feed, with its like count.
public struct Post: Sendable, Hashable, Codable {
    /// The post's id, such as `post1`.
    public let id: String
    /// The author's user id.
    public let authorID: String
    /// The post's text.
    public let body: String
    /// When the post was created.
    public let createdAt: Date
    /// How many users like the post; always equal to its like rows.
    public var likeCount: Int
    /// The post's position in insertion order, used to break ties in creation time (and by feed cursors).
    public let sequence: Int64

    /// Creates a post value.
    public init(id: String, authorID: String, body: String, createdAt: Date, likeCount: Int, sequence: Int64) {
        self.id = id
        self.authorID = authorID
        self.body = body
        self.createdAt = createdAt
        self.likeCount = likeCount
        self.sequence = sequence
    }
}
