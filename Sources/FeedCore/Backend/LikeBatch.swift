public import Foundation

/// One like command as a backend applies it: see ``FeedTransaction/applyLikeUnits(_:)``.
public struct LikeOperation: Sendable, Hashable {
    /// What the command does.
    public enum Action: String, Sendable, Hashable {
        /// Like the post (nothing changes when it is liked already).
        case like
        /// Take the like back (nothing changes when there is none).
        case unlike
        /// Like when not liked, unlike when liked.
        case toggle
    }

    /// What to do.
    public let action: Action
    /// The acting user's id.
    public let userID: String
    /// The post's id.
    public let postID: String

    /// Creates an operation.
    public init(_ action: Action, userID: String, postID: String) {
        self.action = action
        self.userID = userID
        self.postID = postID
    }
}

/// One caller's like operations, which commit together or not at all.
public struct LikeUnit: Sendable, Hashable {
    /// The operations, in order.
    public let operations: [LikeOperation]
    /// When the caller made them (the likes' and events' time).
    public let at: Date

    /// Creates a unit.
    public init(operations: [LikeOperation], at: Date) {
        self.operations = operations
        self.at = at
    }
}

/// What one like operation did.
public struct LikeOutcome: Sendable, Hashable {
    /// Whether the user likes the post afterwards.
    public let liked: Bool
    /// The post's like count afterwards.
    public let likeCount: Int
    /// The event the change appended; `nil` when nothing changed.
    public let event: EventRecord?

    /// Creates an outcome.
    public init(liked: Bool, likeCount: Int, event: EventRecord?) {
        self.liked = liked
        self.likeCount = likeCount
        self.event = event
    }
}
