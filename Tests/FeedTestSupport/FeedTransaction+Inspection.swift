package import FeedCore

/// Whole-table reads and cursor removal that no product code needs, for tests on either backend: each one portable
/// SQL statement run through the transaction's ``FeedUserStatements``.
extension FeedTransaction {
    /// Every like as a pair of ids.
    package func allLikes() throws -> Set<LikePair> {
        let rows = try userStatements.fetch(
            "SELECT u.id, p.id FROM likes l JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key", [])
        return Set(rows.map { LikePair(userID: $0[0].text ?? "", postID: $0[1].text ?? "") })
    }

    /// Every durable subscriber's cursor.
    package func subscriberCursors() throws -> [String: Int64] {
        let rows = try userStatements.fetch("SELECT name, last_seq FROM subscriber_cursors", [])
        return Dictionary(uniqueKeysWithValues: rows.map { ($0[0].text ?? "", $0[1].integer ?? 0) })
    }

    /// Removes a durable subscriber's cursor.
    package func removeSubscriberCursor(for name: String) throws {
        try userStatements.execute("DELETE FROM subscriber_cursors WHERE name = $1", [.text(name)])
    }
}
