/// One element of the command line after tokenizing, with the position it came from.
///
/// The tokenizer only classifies; it knows nothing of which options exist or which take values.
struct Token: Sendable, Hashable {
    /// What the element is.
    enum Kind: Sendable, Hashable {
        /// A plain value: a command name, an argument, or an option's value.
        case value(String)
        /// `--name` (with `value == nil`) or `--name=value`.
        case option(name: String, value: String?)
        /// One letter of a `-abc` cluster, such as `h` for `-h`.
        case short(Character)
        /// `--`: everything after it is a value.
        case terminator
    }

    /// What the element is.
    let kind: Kind
    /// Its index in the arguments (0 is the first argument after the program name).
    let index: Int
}
