internal import FeedCore
internal import Foundation

/// The source's side of replica sync on PostgreSQL: each operation one statement (one round trip).
extension PostgresTransaction: FeedSyncSource {
    func syncClient(_ clientID: String) throws -> SyncClientRecord? {
        let result = try run(
            "SELECT user_id, last_mutation, last_mutation_seq FROM sync_clients WHERE client_id = $1", [.text(clientID)])
        return result.rowCount > 0 ? Self.client(result) : nil
    }

    func claimSyncClient(_ clientID: String, userID: String, at time: Date) throws -> SyncClientRecord {
        try requireWritable()
        try run(
            "INSERT INTO sync_clients (client_id, user_id, updated_at) VALUES ($1, $2, $3) ON CONFLICT (client_id) DO NOTHING",
            [.text(clientID), .text(userID), .integer(millis(time))])
        // The row lock orders two pushes of one client: the second sees the first's numbers.
        let result = try run(
            "UPDATE sync_clients SET updated_at = $2 WHERE client_id = $1 RETURNING user_id, last_mutation, last_mutation_seq",
            [.text(clientID), .integer(millis(time))])
        guard result.rowCount > 0 else { throw StorageError.constraintViolation(field: "client id", reason: "its record vanished") }
        return Self.client(result)
    }

    func recordSyncHandled(clientID: String, through number: Int64, lastSeq: Int64) throws {
        try requireWritable()
        try run(
            "UPDATE sync_clients SET last_mutation = $2, last_mutation_seq = $3 WHERE client_id = $1",
            [.text(clientID), .integer(number), .integer(lastSeq)])
    }

    /// All refusals in one statement: the numbers and reasons as two bound arrays.
    func recordSyncRejections(_ rejections: [SyncRejectionRecord], clientID: String, at time: Date) throws {
        try requireWritable()
        guard !rejections.isEmpty else { return }
        try run(
            """
            INSERT INTO sync_rejections (client_id, mutation, reason, at)
            SELECT $1, r.mutation, r.reason, $4 FROM unnest($2::bigint[], $3::text[]) AS r (mutation, reason)
            ON CONFLICT DO NOTHING
            """,
            [
                .text(clientID), .text(PostgresArray.integers(rejections.map(\.number))),
                .text(PostgresArray.text(rejections.map(\.reason))), .integer(millis(time)),
            ])
    }

    func syncRejections(clientID: String, numbers: ClosedRange<Int64>) throws -> [SyncRejectionRecord] {
        let result = try run(
            "SELECT mutation, reason FROM sync_rejections WHERE client_id = $1 AND mutation BETWEEN $2 AND $3 ORDER BY mutation",
            [.text(clientID), .integer(numbers.lowerBound), .integer(numbers.upperBound)])
        return (0..<result.rowCount).map { SyncRejectionRecord(number: result.int64($0, 0) ?? 0, reason: result.string($0, 1) ?? "") }
    }

    func existingPostIDs(_ ids: [String]) throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        let result = try run("SELECT id FROM posts WHERE id = ANY($1::text[])", [.text(PostgresArray.text(ids))])
        return Set((0..<result.rowCount).compactMap { result.string($0, 0) })
    }

    /// One statement: a created user's name and a created post's body come from subqueries that run only for those
    /// kinds, so the log is read in seq order through its key and stops at `limit` (joining the tables instead made
    /// the planner sort every later event on each pull).
    func syncEvents(after seq: Int64, limit: Int) throws -> [SyncSourceEvent] {
        let result = try run(
            """
            SELECT e.seq, e.kind, e.user_id, e.post_id, e.like_count, e.at,
                   CASE WHEN e.kind = 'userCreated' THEN (SELECT u.name FROM users u WHERE u.id = e.user_id) END,
                   CASE WHEN e.kind = 'postCreated' THEN (SELECT p.body FROM posts p WHERE p.id = e.post_id) END
            FROM events e
            WHERE e.seq > $1 ORDER BY e.seq LIMIT $2
            """, [.integer(seq), .integer(Int64(limit))])
        return try (0..<result.rowCount).map { row in
            SyncSourceEvent(record: try decodeEvent(result, row: row), userName: result.string(row, 6), postBody: result.string(row, 7))
        }
    }

    func snapshotUsers(after id: String?, limit: Int) throws -> [User] {
        let result = try run(
            "SELECT id, name, created_at FROM users WHERE id > $1 ORDER BY id LIMIT $2", [.text(id ?? ""), .integer(Int64(limit))])
        return (0..<result.rowCount).map { row in
            User(id: result.string(row, 0) ?? "", name: result.string(row, 1) ?? "", createdAt: date(millis: result.int64(row, 2) ?? 0))
        }
    }

    func snapshotPosts(viewerKey: Int64, after cursor: FeedCursor?, limit: Int) throws -> [FeedRow] {
        let after = cursor ?? FeedCursor(createdAtMillis: .min, sequence: .min)
        let result = try run(
            """
            SELECT p.id, p.author_id, p.body, p.created_at, p.like_count, p.post_key,
                   EXISTS (SELECT 1 FROM likes l WHERE l.user_key = $1 AND l.post_key = p.post_key)
            FROM posts p
            WHERE (p.created_at, p.post_key) > ($2, $3)
            ORDER BY p.created_at, p.post_key
            LIMIT $4
            """,
            [.integer(viewerKey), .integer(after.createdAtMillis), .integer(after.sequence), .integer(Int64(limit))])
        return (0..<result.rowCount).map { row in
            FeedRow(post: Self.decodePost(result, row: row), liked: result.bool(row, 6) ?? false)
        }
    }

    private static func client(_ result: PostgresResult) -> SyncClientRecord {
        SyncClientRecord(userID: result.string(0, 0) ?? "", lastMutation: result.int64(0, 1) ?? 0, lastMutationSeq: result.int64(0, 2) ?? 0)
    }
}
