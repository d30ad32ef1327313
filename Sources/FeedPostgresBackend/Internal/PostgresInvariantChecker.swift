internal import FeedCore

/// Checks a FeedSync database on PostgreSQL: the same rules, with the same names, as the SQLite backend's
/// `InvariantChecker`, plus what PostgreSQL can check cheaply.
///
/// - `integrity`: the like-count triggers exist and are enabled; no like or post points at a missing row (the
///   foreign keys make that impossible unless they were bypassed); the event-log head is at least every seq in the
///   log and equals the newest one (pruning keeps the newest event).
/// - `like-count`: every post's and every user's `like_count` equals its like rows (a user's count, schema version 4,
///   chooses the feed page's form of the like flag).
/// - `log-order`: seqs are gap-free from the first retained to the last.
/// - `log-replay`: when the log is complete (never pruned, never bulk-loaded), replaying its likes and unlikes from
///   an empty set gives exactly the likes table — computed in SQL (the last like or unlike of each pair decides,
///   unless its post was deleted after it; an event of an erased user, whose id is empty, changes no like),
///   reporting at most 20 pairs each way, sorted by post then user.
/// - `no-trace`: nothing names a user who does not exist (an erased one): no event's non-empty user id, API token,
///   sync client record, or sync rejection (through its client's record); no like or post row names a deleted post
///   (one with a tombstone). See `TraceViolation`.
///
/// - Complexity: full scans of every table; meant for `feedsync check` and tests, not hot paths.
struct PostgresInvariantChecker {
    let run: (String, [DatabaseValue]) throws(StorageError) -> PostgresResult

    func violations() throws(StorageError) -> [InvariantViolation] {
        var found: [InvariantViolation] = []
        let triggers = try run(
            """
            SELECT name, (SELECT tgenabled FROM pg_trigger
                          WHERE tgrelid = 'likes'::regclass AND tgname = name AND NOT tgisinternal)
            FROM unnest(ARRAY['likes_count_insert', 'likes_count_delete']) AS name ORDER BY name
            """, [])
        for row in 0..<triggers.rowCount {
            let name = triggers.string(row, 0) ?? ""
            switch triggers.string(row, 1) {
            case nil: found.append(InvariantViolation(rule: "integrity", detail: "trigger \(name) is missing"))
            case "D": found.append(InvariantViolation(rule: "integrity", detail: "trigger \(name) is disabled"))
            default: break
            }
        }
        let orphans = try run(
            """
            SELECT 'likes', count(*) FROM likes l
            WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.user_key = l.user_key)
               OR NOT EXISTS (SELECT 1 FROM posts p WHERE p.post_key = l.post_key)
            UNION ALL
            SELECT 'posts', count(*) FROM posts p WHERE NOT EXISTS (SELECT 1 FROM users u WHERE u.id = p.author_id)
            """, [])
        for row in 0..<orphans.rowCount where (orphans.int64(row, 1) ?? 0) > 0 {
            found.append(
                InvariantViolation(
                    rule: "integrity",
                    detail: "foreign key violation: \(orphans.int64(row, 1) ?? 0) rows of \(orphans.string(row, 0) ?? "")"))
        }
        let head = try run("SELECT (SELECT last_seq FROM event_log_head WHERE id = 1), (SELECT max(seq) FROM events)", [])
        if let maximum = head.int64(0, 1), maximum != (head.int64(0, 0) ?? -1) {
            found.append(
                InvariantViolation(
                    rule: "integrity",
                    detail: "the event-log head is \(head.int64(0, 0).map(String.init) ?? "missing") but the newest seq is \(maximum)"))
        }

        // Posts' counts, then users' (schema version 4): the same check on each table.
        let countChecks = [
            (
                "post",
                """
                SELECT t.id, t.like_count, coalesce(c.n, 0) AS actual
                FROM posts t LEFT JOIN (SELECT post_key, count(*) AS n FROM likes GROUP BY post_key) c ON c.post_key = t.post_key
                WHERE t.like_count <> coalesce(c.n, 0) ORDER BY t.post_key
                """
            ),
            (
                "user",
                """
                SELECT t.id, t.like_count, coalesce(c.n, 0) AS actual
                FROM users t LEFT JOIN (SELECT user_key, count(*) AS n FROM likes GROUP BY user_key) c ON c.user_key = t.user_key
                WHERE t.like_count <> coalesce(c.n, 0) ORDER BY t.user_key
                """
            ),
        ]
        for (noun, sql) in countChecks {
            let counts = try run(sql, [])
            for row in 0..<counts.rowCount {
                let id = counts.string(row, 0) ?? ""
                let stored = counts.int64(row, 1) ?? 0
                let actual = counts.int64(row, 2) ?? 0
                found.append(
                    InvariantViolation(rule: "like-count", detail: "\(noun) \"\(id)\" has like_count \(stored) but \(actual) like rows"))
            }
        }

        let gaps = try run(
            """
            SELECT seq, previous FROM (SELECT seq, lag(seq) OVER (ORDER BY seq) AS previous FROM events) s
            WHERE seq <> previous + 1 ORDER BY seq
            """, [])
        for row in 0..<gaps.rowCount {
            found.append(
                InvariantViolation(rule: "log-order", detail: "seq \(gaps.int64(row, 0) ?? 0) follows seq \(gaps.int64(row, 1) ?? 0)"))
        }

        found += try traceViolations()

        let complete = try run("SELECT pruned_through = 0 AND bulk_loaded = 0 FROM log_state WHERE id = 1", []).bool(0, 0) ?? false
        if complete {
            let replay = try run(
                """
                WITH last AS (
                    SELECT DISTINCT ON (user_id, post_id) user_id, post_id, kind, seq
                    FROM events WHERE kind IN ('liked', 'unliked') AND user_id <> '' ORDER BY user_id, post_id, seq DESC
                ),
                replayed AS (
                    SELECT user_id, post_id FROM last
                    WHERE kind = 'liked'
                      AND NOT EXISTS (SELECT 1 FROM events d WHERE d.kind = 'postDeleted' AND d.post_id = last.post_id AND d.seq > last.seq)
                ),
                actual AS (
                    SELECT u.id AS user_id, p.id AS post_id FROM likes l
                    JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key
                ),
                missing AS (SELECT * FROM (SELECT * FROM actual EXCEPT SELECT * FROM replayed) m ORDER BY post_id, user_id LIMIT 20),
                extra AS (SELECT * FROM (SELECT * FROM replayed EXCEPT SELECT * FROM actual) e ORDER BY post_id, user_id LIMIT 20)
                SELECT 0 AS side, user_id, post_id FROM missing
                UNION ALL
                SELECT 1, user_id, post_id FROM extra
                ORDER BY side, post_id, user_id
                """, [])
            for row in 0..<replay.rowCount {
                let user = replay.string(row, 1) ?? ""
                let post = replay.string(row, 2) ?? ""
                let detail =
                    replay.int64(row, 0) == 0
                    ? "like \(user)→\(post) is not in the log" : "the log has like \(user)→\(post) but the likes table does not"
                found.append(InvariantViolation(rule: "log-replay", detail: detail))
            }
        }
        return found
    }
}
