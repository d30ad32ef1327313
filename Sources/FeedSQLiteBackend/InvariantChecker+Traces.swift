internal import FeedCore
internal import FeedSQLite

/// The `no-trace` rule on SQLite (``TraceViolation``): nothing names a user who does not exist or a deleted post.
extension InvariantChecker {
    /// Each kind's statement: one row per subject with how many rows name it, at most `?1` subjects, sorted.
    static func traceStatement(_ kind: TraceViolation.Kind) -> String {
        switch kind {
        case .eventUser:
            // Through `users.id`'s unique index: one probe per event of the log.
            """
            SELECT user_id, count(*) FROM events e
            WHERE user_id <> '' AND NOT EXISTS (SELECT 1 FROM users u WHERE u.id = e.user_id)
            GROUP BY user_id ORDER BY user_id LIMIT ?1
            """
        case .tokenUser:
            """
            SELECT user_id, count(*) FROM api_tokens t WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = t.user_id)
            GROUP BY user_id ORDER BY user_id LIMIT ?1
            """
        case .syncClientUser:
            """
            SELECT user_id, count(*) FROM sync_clients c WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = c.user_id)
            GROUP BY user_id ORDER BY user_id LIMIT ?1
            """
        case .syncRejectionUser:
            """
            SELECT client_id, count(*) FROM sync_rejections r
            WHERE NOT EXISTS (SELECT 1 FROM sync_clients c JOIN users u ON u.id = c.user_id WHERE c.client_id = r.client_id)
            GROUP BY client_id ORDER BY client_id LIMIT ?1
            """
        case .deletedPostLike:
            """
            SELECT p.id, count(*) FROM likes l JOIN posts p ON p.post_key = l.post_key JOIN deleted_posts d ON d.id = p.id
            GROUP BY p.id ORDER BY p.id LIMIT ?1
            """
        case .deletedPostRow:
            "SELECT p.id, 1 FROM posts p JOIN deleted_posts d ON d.id = p.id ORDER BY p.id LIMIT ?1"
        }
    }

    /// Every trace found, at most ``TraceViolation/limit`` subjects per kind.
    func traceViolations() throws -> [InvariantViolation] {
        var found: [InvariantViolation] = []
        try db.mapErrors {
            for kind in TraceViolation.Kind.allCases {
                try db.makeStatement(Self.traceStatement(kind)).forEachRow(Int64(TraceViolation.limit)) { row in
                    found.append(TraceViolation.violation(kind, subject: row.string(at: 0), count: row.int64(at: 1)))
                }
            }
        }
        return found
    }
}
