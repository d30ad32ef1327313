/// `seed [--posts N] [--users N] [--likes N]`.
struct SeedCommand: Sendable, Hashable {
    /// Posts `post1…postN`.
    let posts: Int
    /// Likers `user1…userN` (plus `user0`, an author).
    let users: Int
    /// Distinct likes.
    let likes: Int
}
