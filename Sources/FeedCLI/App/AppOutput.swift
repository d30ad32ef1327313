/// Where the app writes: screens on stdout, errors on stderr, a prompt only when a person types.
struct AppOutput: Sendable {
    /// The console.
    let console: Console
    /// Styling for stdout.
    let style: Style
    /// Whether to show a prompt (stdin is a terminal).
    let interactive: Bool

    /// Prints a screen followed by a blank line.
    func lines(_ lines: [String]) {
        console.out(lines.joined(separator: "\n") + "\n\n")
    }

    /// Prints an error line on stderr.
    func error(_ message: String) {
        console.error(message)
    }

    /// Prints a notice about another process's change, on its own line.
    func notice(_ text: String) {
        console.out((interactive ? "\r" : "") + text + "\n")
        prompt()
    }

    /// Shows the prompt when a person types.
    func prompt() {
        if interactive { console.out("feedsync> ") }
    }

    /// Ends the prompt line.
    func finish() {
        if interactive { console.out("\n") }
    }
}
