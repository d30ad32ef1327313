#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// Where the CLI writes: stdout for results, stderr for errors and progress.
///
/// Each call is one unbuffered `write(2)` loop on the file descriptor, so streaming output reaches a pipe line by
/// line with nothing left in a buffer at exit, and concurrent callers (sinks on a committing thread) never split
/// each other's small writes (POSIX: pipe writes up to `PIPE_BUF` are atomic).
struct Console: Sendable {
    /// Writes `text` to stdout (no newline added).
    func out(_ text: String) {
        Self.write(text, to: 1)
    }

    /// Writes `text` and a newline to stdout.
    func line(_ text: String = "") {
        out(text + "\n")
    }

    /// Writes `text` and a newline to stderr.
    func error(_ text: String) {
        Self.write(text + "\n", to: 2)
    }

    /// Writes `text` to stderr as is (for progress bars that redraw with `\r`).
    func errorRaw(_ text: String) {
        Self.write(text, to: 2)
    }

    private static func write(_ text: String, to descriptor: Int32) {
        var text = text
        text.withUTF8 { buffer in
            guard var base = buffer.baseAddress else { return }
            var remaining = buffer.count
            while remaining > 0 {
                let written = Glibc.write(descriptor, base, remaining)
                if written < 0 {
                    if errno == EINTR { continue }
                    return  // EPIPE and friends: the reader went away; nothing useful to do.
                }
                remaining -= written
                base += written
            }
        }
    }
}
