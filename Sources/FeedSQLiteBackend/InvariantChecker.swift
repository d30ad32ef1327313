public import FeedCore
public import FeedSQLite

/// Checks a FeedSync database: SQLite's integrity check plus the invariants the schema and code promise.
///
/// - `integrity`: `PRAGMA integrity_check` and `PRAGMA foreign_key_check` are clean.
/// - `like-count`: every post's `like_count` equals its like rows — on a replica, which holds only its user's likes
///   and the source's counts, is at least its like rows, and every like row is the replica user's (`replica-likes`).
/// - `log-order`: seqs are strictly increasing and gap-free from the first retained to the last.
/// - `log-replay`: when the log is complete (never pruned, never bulk-loaded), replaying its likes and unlikes from
///   an empty set gives exactly the likes table (an event of an erased user changes no like; `postDeleted` removes
///   its post's likes).
/// - `no-trace`: nothing names a user who does not exist (an erased one): no event's non-empty user id, API token,
///   sync client record, or sync rejection (through its client's record); no like or post row names a deleted post
///   (one with a tombstone). See ``TraceViolation``.
///
/// - Complexity: full scans of every table; meant for `feedsync check` and tests, not hot paths.
public struct InvariantChecker {
    let db: Connection

    /// A checker over `db` (use a read transaction for a consistent snapshot).
    public init(_ db: Connection) { self.db = db }

    /// Every violation found; empty when all invariants hold.
    public func violations() throws -> [InvariantViolation] {
        var found: [InvariantViolation] = []
        try db.mapErrors {
            try db.makeStatement("PRAGMA integrity_check").forEachRow { row in
                let line = row.string(at: 0)
                if line != "ok" { found.append(InvariantViolation(rule: "integrity", detail: line)) }
            }
            try db.makeStatement("PRAGMA foreign_key_check").forEachRow { row in
                found.append(
                    InvariantViolation(rule: "integrity", detail: "foreign key violation in \(row.string(at: 0)) row \(row.int64(at: 1))"))
            }
            let replicaUser = try isReplica() ? try db.fetchOne("SELECT user_id FROM replica_state WHERE id = 1") { $0.string(at: 0) } : nil
            // Every post's likes counted in one grouped pass over the table (likes have no index by post). A replica
            // (?1 = 1) holds its user's likes only: a count may exceed its rows there, never fall below them.
            try db.makeStatement(
                """
                SELECT p.id, p.like_count, coalesce(counted.n, 0) AS actual
                FROM posts p LEFT JOIN (SELECT post_key, count(*) AS n FROM likes GROUP BY post_key) AS counted
                    ON counted.post_key = p.post_key
                WHERE p.like_count <> actual AND (?1 = 0 OR p.like_count < actual) ORDER BY p.post_key
                """
            ).forEachRow(Int64(replicaUser == nil ? 0 : 1)) { row in
                found.append(
                    InvariantViolation(
                        rule: "like-count",
                        detail: "post \"\(row.string(at: 0))\" has like_count \(row.int64(at: 1)) but \(row.int64(at: 2)) like rows"))
            }
            if let replicaUser {
                try db.makeStatement(
                    "SELECT u.id, count(*) FROM likes l JOIN users u ON u.user_key = l.user_key WHERE u.id <> ? GROUP BY u.id"
                ).forEachRow(replicaUser) { row in
                    found.append(
                        InvariantViolation(
                            rule: "replica-likes",
                            detail: "a replica of \"\(replicaUser)\" holds \(row.int64(at: 1)) likes of \"\(row.string(at: 0))\""))
                }
            }
            var previous: Int64?
            try db.makeStatement("SELECT seq FROM events ORDER BY rowid").forEachRow { row in
                let seq = row.int64(at: 0)
                if let previous, seq != previous + 1 {
                    found.append(InvariantViolation(rule: "log-order", detail: "seq \(seq) follows seq \(previous)"))
                }
                previous = seq
            }
        }
        found += try traceViolations()
        if try isLogComplete() {
            var replayed = Set<LikePair>()
            try EventLog(db).forEach(after: 0) { event in
                // An event whose user was erased (empty user id) changes no like row; a deleted post takes its likes.
                guard let postID = event.postID else { return }
                switch event.kind {
                case .liked where !event.userID.isEmpty: replayed.insert(LikePair(userID: event.userID, postID: postID))
                case .unliked where !event.userID.isEmpty: replayed.remove(LikePair(userID: event.userID, postID: postID))
                case .postDeleted: replayed = replayed.filter { $0.postID != postID }
                case .liked, .unliked, .postCreated, .userCreated, .likeCountChanged, .userDeleted: break
                }
            }
            let actual = try LikeRepository(db).allPairs()
            for missing in actual.subtracting(replayed).sorted(by: { ($0.postID, $0.userID) < ($1.postID, $1.userID) }).prefix(20) {
                found.append(InvariantViolation(rule: "log-replay", detail: "like \(missing.userID)→\(missing.postID) is not in the log"))
            }
            for extra in replayed.subtracting(actual).sorted(by: { ($0.postID, $0.userID) < ($1.postID, $1.userID) }).prefix(20) {
                found.append(
                    InvariantViolation(
                        rule: "log-replay", detail: "the log has like \(extra.userID)→\(extra.postID) but the likes table does not"))
            }
        }
        return found
    }

    /// Whether the database is a replica (`replica_state` has its row).
    public func isReplica() throws -> Bool {
        try db.mapErrors {
            try db.fetchInt64("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'replica_state'") == 1
                && db.fetchInt64("SELECT count(*) FROM replica_state") == 1
        }
    }

    /// Whether the log still holds every change since the database was created (never pruned or bulk-loaded).
    public func isLogComplete() throws -> Bool {
        try db.mapErrors {
            try db.fetchInt64("SELECT pruned_through = 0 AND bulk_loaded = 0 FROM log_state WHERE id = 1") == 1
        }
    }
}
