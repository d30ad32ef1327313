/// The metadata of one positional argument, such as `POST`.
struct ArgumentSpec: Sendable, Hashable {
    /// The placeholder, such as `POST`.
    let name: String
    /// One line of help.
    let help: String
    /// What shell completion offers for it.
    var completion: ValueCompletion = .none
}
