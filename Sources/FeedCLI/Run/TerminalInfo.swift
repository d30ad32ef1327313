#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Which standard streams are terminals.
struct TerminalInfo: Sendable, Hashable {
    /// Whether stdin is a terminal (the app shows a prompt).
    var stdinIsTerminal: Bool
    /// Whether stdout is a terminal.
    var stdoutIsTerminal: Bool
    /// Whether stderr is a terminal.
    var stderrIsTerminal: Bool

    /// This process's streams.
    static var current: TerminalInfo {
        TerminalInfo(stdinIsTerminal: isatty(0) == 1, stdoutIsTerminal: isatty(1) == 1, stderrIsTerminal: isatty(2) == 1)
    }
}
