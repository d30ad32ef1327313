/// `post add [--author ID] [--id POSTID] TEXT`.
struct PostAddCommand: Sendable, Hashable {
    /// The author's user id; when `nil`, the replica's user (required on any other database).
    let authorID: String?
    /// The new post's id, generated when `nil`.
    let postID: String?
    /// The text.
    let text: String
}
