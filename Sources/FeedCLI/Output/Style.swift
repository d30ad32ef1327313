/// ANSI styling that turns itself off when colour is not wanted.
struct Style: Sendable {
    /// Whether to emit escape sequences.
    let enabled: Bool

    /// Bold text (headers).
    func bold(_ text: String) -> String { wrap(text, "1") }
    /// Dimmed text (secondary columns).
    func dim(_ text: String) -> String { wrap(text, "2") }
    /// Red text (the heart's count).
    func red(_ text: String) -> String { wrap(text, "31") }
    /// Cyan text (ids).
    func cyan(_ text: String) -> String { wrap(text, "36") }

    private func wrap(_ text: String, _ code: String) -> String {
        enabled ? "\u{1B}[\(code)m\(text)\u{1B}[0m" : text
    }
}
