/// What a line typed into `feedsync app` asks for: the view's action.
enum AppAction: Sendable, Hashable {
    /// `feed`: reload the feed and show it.
    case showFeed
    /// `open POST`: the detail view of a post.
    case open(postID: String)
    /// `like` in the detail view.
    case like
    /// `unlike` in the detail view.
    case unlike
    /// `toggle` in the detail view.
    case toggle
    /// `back`: the feed as the projection holds it (already showing the change).
    case back
    /// `more`: the next page.
    case more
    /// `help`.
    case help
    /// `quit` (or end of input).
    case quit
    /// A line that is not a command, with a message saying why.
    case invalid(String)

    /// Parses one input line; `nil` for a blank line or a `#` comment.
    static func parse(_ line: String) -> AppAction? {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let first = words.first, !first.hasPrefix("#") else { return nil }
        let rest = Array(words.dropFirst())
        func noArguments(_ action: AppAction) -> AppAction {
            rest.isEmpty ? action : .invalid("'\(first)' takes no argument. Type 'help' for commands.")
        }
        switch first.lowercased() {
        case "feed", "list", "refresh": return noArguments(.showFeed)
        case "open", "show":
            guard rest.count == 1 else { return .invalid("use 'open POST', such as 'open post3'.") }
            return .open(postID: rest[0])
        case "like": return noArguments(.like)
        case "unlike": return noArguments(.unlike)
        case "toggle": return noArguments(.toggle)
        case "back": return noArguments(.back)
        case "more", "next": return noArguments(.more)
        case "help", "?": return noArguments(.help)
        case "quit", "exit", "q": return noArguments(.quit)
        default:
            return .invalid("unknown command \(TextSanitizer.shortened(first, width: 40).debugDescription). Type 'help' for commands.")
        }
    }

    /// The help lines shown by `help`.
    static let helpLines = [
        "feed          show the feed again (reloaded)",
        "open POST     open a post's detail view",
        "like          like the open post",
        "unlike        take the like back",
        "toggle        like or unlike, whichever applies",
        "back          back to the feed (it already shows your change)",
        "more          load the next page of the feed",
        "help          this list",
        "quit          leave (end of input does too)",
    ]
}
