public import Foundation

/// A user: someone who writes posts and likes them.
public struct User: Sendable, Hashable, Codable {
    /// The user's id, such as `user1`.
    public let id: String
    /// A display name; may be empty.
    public let name: String
    /// When the user was created.
    public let createdAt: Date

    /// Creates a user value.
    public init(id: String, name: String, createdAt: Date) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
    }
}
