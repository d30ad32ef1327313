internal import FeedCore
internal import Foundation

/// Deterministic bulk sample data: the benchmarks' data set (`Docs/Performance.md`, "What is measured"), loaded through
/// `BulkLoader` (one transaction, reused statements).
///
/// Inputs follow the reference definitions exactly: a 64-bit LCG (`state = state · 6364136223846793005 +
/// 1442695040888963407`, `next(bound) = (state >> 33) % bound`) with seed 1 for post times and seed 2 for likes;
/// post `i` is `"post\(i)"` by `"user\(i % 1000)"`, created at `t0 + next(posts)` seconds; like `k` pairs
/// `"user\(1 + next(users))"` with `"post\(1 + next(posts))"`, duplicates skipped, created at `t0 + k`.
/// Users `user0 … userN` are created (the authors included). Memory stays bounded by the number of users and
/// posts: the database, not a set, deduplicates likes.
public struct SeedPlan: Sendable, Hashable {
    /// Number of posts (`post1 … postP`).
    public var posts: Int
    /// Number of users likes are drawn from (`user1 … userU`).
    public var users: Int
    /// Number of distinct likes.
    public var likes: Int

    /// The reference time `t0` (seconds since 1970).
    public static let t0: Int64 = 1_600_000_000
    static let filler = "lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore"

    /// A plan; see ``validate()`` for the limits.
    public init(posts: Int, users: Int, likes: Int) {
        self.posts = posts
        self.users = users
        self.likes = likes
    }

    /// Checks the counts: posts and users at least 1 (posts ≤ 10,000,000, users ≤ 1,000,000), likes ≥ 0 and at
    /// most half of the (user, post) pairs (drawing distinct pairs near saturation would take very long) and at
    /// most 100,000,000.
    public func validate() throws(FeedError) {
        guard (1...10_000_000).contains(posts) else { throw FeedError.invalidLimit(posts, maximum: 10_000_000) }
        guard (1...1_000_000).contains(users) else { throw FeedError.invalidLimit(users, maximum: 1_000_000) }
        let pairs = users.multipliedReportingOverflow(by: posts)
        let maximum = pairs.overflow ? 100_000_000 : min(pairs.partialValue / 2, 100_000_000)
        guard (0...maximum).contains(likes) else { throw FeedError.invalidLimit(likes, maximum: maximum) }
    }
}

/// A step of a running seed, for progress bars.
public struct SeedProgress: Sendable, Hashable {
    /// What is being inserted: `users`, `posts` or `likes`.
    public let phase: String
    /// Rows done in this phase.
    public let done: Int
    /// Rows in this phase.
    public let total: Int
}

/// What a seed inserted.
public struct SeedSummary: Sendable, Hashable {
    /// Rows inserted.
    public let users: Int, posts: Int, likes: Int
}

extension FeedService {
    /// Loads ``SeedPlan`` data into an empty database through the bulk path, in one transaction.
    ///
    /// - Parameter progress: called now and then (about every 1 % of a phase) on the calling thread.
    /// - Throws: ``FeedError/invalidLimit(_:maximum:)`` for bad counts; ``FeedError/postAlreadyExists(_:)`` when the
    ///   database already has the sample posts. Nothing is written on failure.
    @discardableResult
    public func seed(_ plan: SeedPlan, progress: (SeedProgress) -> Void = { _ in }) throws(FeedError) -> SeedSummary {
        try checkOpen()
        try plan.validate()
        let userCount = max(plan.users, min(999, plan.posts)) + 1
        do {
            return try backend.bulkLoad { loader in
                var userKeys = [Int64](repeating: 0, count: userCount)
                for u in 0..<userCount {
                    userKeys[u] = try loader.addUser(id: "user\(u)", name: "", createdAt: Date(timeIntervalSince1970: Double(SeedPlan.t0)))
                    if u % max(1, userCount / 100) == 0 { progress(SeedProgress(phase: "users", done: u, total: userCount)) }
                }
                var postKeys = [Int64](repeating: 0, count: plan.posts)
                var times = SeedRandom(seed: 1)
                for i in 1...plan.posts {
                    let created = (SeedPlan.t0 + Int64(times.next(plan.posts))) * 1000
                    postKeys[i - 1] = try loader.addPost(
                        id: "post\(i)", authorID: "user\(i % 1000)", body: "post \(i): \(SeedPlan.filler)",
                        createdAt: Date(timeIntervalSince1970: Double(created) / 1000))
                    if i % max(1, plan.posts / 100) == 0 { progress(SeedProgress(phase: "posts", done: i, total: plan.posts)) }
                }
                var pairs = SeedRandom(seed: 2)
                var inserted = 0
                while inserted < plan.likes {
                    let user = 1 + pairs.next(plan.users)
                    let post = 1 + pairs.next(plan.posts)
                    if try loader.addLikeIfAbsent(
                        userKey: userKeys[user], postKey: postKeys[post - 1], createdAtMillis: (SeedPlan.t0 + Int64(inserted)) * 1000)
                    {
                        inserted += 1
                        if inserted % max(1, plan.likes / 100) == 0 {
                            progress(SeedProgress(phase: "likes", done: inserted, total: plan.likes))
                        }
                    }
                }
                return SeedSummary(users: userCount, posts: plan.posts, likes: inserted)
            }
        } catch {
            throw FeedError.wrap(error)
        }
    }
}

/// The reference LCG (Knuth's MMIX constants).
struct SeedRandom {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ bound: Int) -> Int {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Int((state >> 33) % UInt64(bound))
    }
}
