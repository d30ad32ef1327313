internal import FeedJSON
internal import FeedSync
internal import Synchronization

/// Draws `watch` frames when what they show changed, one at a time.
final class WatchRenderer: Sendable {
    private let runner: CommandRunner
    private let viewer: String?
    private let last = Mutex<[String]?>(nil)

    init(runner: CommandRunner, viewer: String?) {
        self.runner = runner
        self.viewer = viewer
    }

    /// Draws `state` unless it is still loading or looks the same as the last frame.
    func render(_ state: FeedListProjection.State) {
        guard !state.isLoading else { return }
        let style = runner.context.style
        let lines: [String]
        if runner.json {
            let rows = state.posts.map { JSONShapes.post($0, liked: state.likedPostIDs.contains($0.id)) }
            lines = [JSONValue.object([("viewer", .optional(viewer)), ("posts", .array(rows))]).rendered]
        } else {
            lines = state.posts.isEmpty ? ["(no posts yet)"] : TextShapes.feed(posts: state.posts, liked: state.likedPostIDs, style: style)
        }
        last.withLock { previous in
            guard previous != lines else { return }
            let first = previous == nil
            previous = lines
            let terminal = runner.context.settings.stdoutIsTerminal && !runner.json
            let title = style.bold("Watching the feed" + (viewer.map { " as " + TextSanitizer.clean($0) } ?? "")) + " — Ctrl-C to stop"
            if terminal {
                runner.console.out("\u{1B}[H\u{1B}[2J" + ([title, ""] + lines).joined(separator: "\n") + "\n")
            } else {
                runner.console.out((first || runner.json ? "" : "\n") + lines.joined(separator: "\n") + "\n")
            }
        }
    }
}
