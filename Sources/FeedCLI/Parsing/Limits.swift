internal import FeedSync

/// The ranges and defaults of every numeric option, in one place (documented in `Docs/CLI.md`).
enum Limits {
    /// `feed --limit`: 1 to the service's largest page.
    static let feedPage = 1...FeedService.maximumPageSize
    /// `feed` without `--limit`.
    static let defaultFeedPage = 20
    /// `events --limit`.
    static let events = 1...1_000_000
    /// `events --since`: a seq (0 for the whole log).
    static let since = Int64(0)...Int64.max
    /// `seed --posts`.
    static let seedPosts = 1...10_000_000
    /// `seed --users`.
    static let seedUsers = 1...1_000_000
    /// `seed --likes` (also at most half of posts × users, so that drawing distinct pairs ends quickly).
    static let seedLikes = 0...100_000_000
    /// `seed` defaults.
    static let defaultSeed = (posts: 1_000, users: 100, likes: 5_000)
}
