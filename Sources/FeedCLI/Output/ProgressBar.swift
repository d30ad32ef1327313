/// A progress bar on stderr, redrawn in place with `\r` when its percentage changes; silent when disabled.
struct ProgressBar {
    private let enabled: Bool
    private let console: Console
    private var shown: (label: String, percent: Int)?

    /// A bar; `enabled` is whether stderr is a terminal.
    init(enabled: Bool, console: Console) {
        self.enabled = enabled
        self.console = console
    }

    /// Shows `done` of `total` for `label`, redrawing only when something visible changed.
    mutating func update(_ label: String, done: Int, total: Int) {
        guard enabled else { return }
        let percent = min(100, max(0, done * 100 / max(total, 1)))
        if let shown, shown.label == label, shown.percent == percent { return }
        shown = (label, percent)
        let filled = percent * 30 / 100
        let bar = String(repeating: "█", count: filled) + String(repeating: "░", count: 30 - filled)
        console.errorRaw("\r\u{1B}[2KSeeding \(label) \(bar) \(percent)%")
    }

    /// Clears the bar's line.
    func finish() {
        guard enabled, shown != nil else { return }
        console.errorRaw("\r\u{1B}[2K")
    }
}
