internal import FeedJSON
internal import FeedSync
internal import Foundation

/// The text output for people: aligned columns, ❤️ on liked posts' lines only, user data sanitized.
enum TextShapes {
    /// How many columns of a body the feed shows.
    static let bodyWidth = 48
    /// The heart shown on liked posts' lines.
    static let heart = "❤️"

    /// The feed table: `POST AUTHOR LIKES TEXT`, ❤️ after the text of liked posts.
    static func feed(posts: [Post], liked: Set<String>, style: Style) -> [String] {
        var table = TextTable(headers: ["POST", "AUTHOR", "LIKES", "TEXT"], alignments: [.left, .left, .right, .left])
        for post in posts {
            // ❤️ marks liked posts only: a heart inside a post's own text is shown as ♥.
            let body = TextSanitizer.shortened(post.body.replacingOccurrences(of: heart, with: "♥"), width: bodyWidth)
            table.rows.append([
                TextSanitizer.clean(post.id), TextSanitizer.clean(post.authorID), String(post.likeCount),
                liked.contains(post.id) ? body + " " + heart : body,
            ])
        }
        return table.lines(header: style.bold) { column, cell in
            switch column {
            case 0: style.cyan(cell)
            case 1: style.dim(cell)
            default: cell
            }
        }
    }

    /// The detail view of one post.
    static func detail(_ post: Post, liked: Bool, style: Style) -> [String] {
        var lines = [
            style.bold(TextSanitizer.clean(post.id)) + " by " + TextSanitizer.clean(post.authorID) + " · "
                + ISOTime.short(post.createdAt) + " UTC"
        ]
        lines += post.body.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + TextSanitizer.clean(String($0)) }
        lines.append(likeLine(count: post.likeCount, liked: liked, style: style))
        return lines
    }

    /// `3 likes ❤️ (you like it)` or `3 likes`.
    static func likeLine(count: Int, liked: Bool, style: Style) -> String {
        let counted = count == 1 ? "1 like" : "\(count) likes"
        return liked ? style.red(counted) + " " + heart + " (you like it)" : counted
    }

    /// One line about a like command's result.
    static func likeResult(_ result: LikeResult) -> String {
        let post = TextSanitizer.clean(result.postID)
        let counted = result.likeCount == 1 ? "1 like" : "\(result.likeCount) likes"
        switch (result.changed, result.liked) {
        case (true, true): return "\(heart) \(TextSanitizer.clean(result.userID)) liked \(post) (\(counted), seq \(result.seq ?? 0))."
        case (true, false): return "\(TextSanitizer.clean(result.userID)) unliked \(post) (\(counted), seq \(result.seq ?? 0))."
        case (false, true): return "\(post) was already liked by \(TextSanitizer.clean(result.userID)) (\(counted)); nothing changed."
        case (false, false): return "\(post) was not liked by \(TextSanitizer.clean(result.userID)) (\(counted)); nothing changed."
        }
    }

    /// The event log as an aligned table.
    static func events(_ events: [EventRecord], style: Style) -> [String] {
        var table = TextTable(
            headers: ["SEQ", "KIND", "POST", "USER", "LIKES", "AT"], alignments: [.right, .left, .left, .left, .right, .left])
        table.rows = events.map { event in
            [
                String(event.seq), event.kind.rawValue, TextSanitizer.clean(event.postID ?? "-"), TextSanitizer.clean(event.userID),
                event.likeCount.map(String.init) ?? "-", ISOTime.format(event.at),
            ]
        }
        return table.lines(header: style.bold)
    }

    /// One event in fixed-width columns, so streamed lines align without knowing later ones.
    static func event(_ event: EventRecord) -> String {
        let post = TextSanitizer.clean(event.postID ?? "-")
        return pad(String(event.seq), 7, right: true) + "  " + pad(event.kind.rawValue, 11) + "  " + pad(post, 12) + "  "
            + pad(TextSanitizer.clean(event.userID), 12) + "  " + pad(event.likeCount.map(String.init) ?? "-", 5, right: true)
            + "  " + ISOTime.format(event.at)
    }

    /// The header matching ``event(_:)``.
    static let eventHeader =
        pad("SEQ", 7, right: true) + "  " + pad("KIND", 11) + "  " + pad("POST", 12) + "  "
        + pad("USER", 12) + "  " + pad("LIKES", 5, right: true) + "  AT"

    static func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
        let padding = String(repeating: " ", count: max(0, width - DisplayWidth.of(text)))
        return right ? padding + text : text + padding
    }

    /// `pushed 3, pulled 12, rejected 0, 0 pending, at seq 41`.
    static func syncReport(_ report: ReplicaSync.Report) -> String {
        "pushed \(report.pushed), pulled \(report.pulled), rejected \(report.rejected), \(report.pendingChanges) pending, "
            + "at seq \(report.lastSyncedSeq)"
    }
}
