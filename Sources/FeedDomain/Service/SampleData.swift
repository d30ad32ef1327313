internal import FeedCore
internal import Foundation

/// Deterministic sample content: the small demo feed, and the large benchmark data set.
public struct SampleData: Sendable {
    /// Users to create: `(id, name)`.
    public let users: [(id: String, name: String)]
    /// Posts to create, oldest first: `(id, authorID, body)`.
    public let posts: [(id: String, authorID: String, body: String)]

    /// The demo feed: three people and five posts, created through the normal commands (with events).
    public static let demo = SampleData(
        users: [("alice", "Alice"), ("bob", "Bob"), ("carol", "Carol")],
        posts: [
            ("post1", "alice", "Hello, FeedSync! A feed that survives restarts."),
            ("post2", "bob", "Liked on the detail screen, shown in the feed at once."),
            ("post3", "carol", "Two processes, one database: likes sync across both."),
            ("post4", "alice", "Offline subscribers catch up without missing anything."),
            ("post5", "bob", "Every like is one transaction with its event row."),
        ])

    /// Creates the users and posts through `service` (so each has its event), skipping none: the database should
    /// not have them yet.
    public func install(into service: FeedService) throws(FeedError) {
        for user in users { try service.createUser(id: user.id, name: user.name) }
        for post in posts { try service.createPost(id: post.id, authorID: post.authorID, body: post.body) }
    }
}
