/// The metadata of one `--option`: its name, the name of its value (nil for a flag) and its help line.
struct OptionSpec: Sendable, Hashable {
    /// The name without dashes, such as `limit`.
    let name: String
    /// The placeholder of its value in help, such as `N`; `nil` for a flag.
    let valueName: String?
    /// One line of help.
    let help: String
    /// What shell completion offers for its value.
    var completion: ValueCompletion = .none

    /// `--limit N` or `--json`.
    var synopsis: String {
        valueName.map { "--\(name) \($0)" } ?? "--\(name)"
    }
}

/// What shell completion offers for an option's value or a positional argument (`feedsync completions`).
enum ValueCompletion: Sendable, Hashable {
    /// Nothing: free text such as an id or a number.
    case none
    /// File and directory names.
    case file
    /// One of these words.
    case choices([String])
}
