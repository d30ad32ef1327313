/// What the command line asks for: help, the version, or a command, plus the global options.
struct Invocation: Sendable, Hashable {
    /// The three outcomes of parsing.
    enum Request: Sendable, Hashable {
        /// Show help: for a command, a group (`user`), or the whole tool (`nil`).
        case help(topic: [String])
        /// Show the version.
        case version
        /// Run a command described by `spec`.
        case run(Command, spec: CommandSpec)
    }

    /// What to do.
    let request: Request
    /// The global options given.
    let global: GlobalOptions
}
