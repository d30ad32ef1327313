internal import FeedSync

/// Which view the app shows.
enum AppScreen: Sendable {
    /// The feed list.
    case feed
    /// A post's detail view, with its projection.
    case detail(PostDetailProjection)
}
