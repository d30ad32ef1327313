/// `user add ID [--name NAME]`.
struct UserAddCommand: Sendable, Hashable {
    /// The new user's id.
    let id: String
    /// The display name, empty when not given.
    let name: String
}
