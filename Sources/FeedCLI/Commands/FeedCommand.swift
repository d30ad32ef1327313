internal import FeedSync

/// `feed [--limit N] [--before CURSOR]`, and the page size of `watch` and `app`.
struct FeedCommand: Sendable, Hashable {
    /// Posts per page.
    let limit: Int
    /// Where the page starts, `nil` for the newest.
    let before: FeedCursor?
}
