package import Foundation

/// A like command: run through ``FeedService/perform(_:)-6q9yl`` (several in one transaction) and, in a batch, by a
/// backend (`FeedTransaction.applyLikes(_:)`).
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

/// One caller's like commands, which commit together or not at all.
package struct LikeUnit: Sendable, Hashable {
    /// The commands, in order.
    package let operations: [LikeCommand]
    /// When the caller made them (the likes' and events' time).
    package let at: Date

    /// Creates a unit.
    package init(operations: [LikeCommand], at: Date) {
        self.operations = operations
        self.at = at
    }
}

/// What one like command did.
package struct LikeOutcome: Sendable, Hashable {
    /// Whether the user likes the post afterwards.
    package let liked: Bool
    /// The post's like count afterwards.
    package let likeCount: Int
    /// The event the change appended; `nil` when nothing changed.
    package let event: EventRecord?

    /// Creates an outcome.
    package init(liked: Bool, likeCount: Int, event: EventRecord?) {
        self.liked = liked
        self.likeCount = likeCount
        self.event = event
    }
}
