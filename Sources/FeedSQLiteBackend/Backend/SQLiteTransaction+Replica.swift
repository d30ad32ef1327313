package import FeedCore
internal import FeedSQLite
package import Foundation

/// A replica's tables (`replica_state`, `replica_mutations`, `replica_base`): a replica is a SQLite file.
extension SQLiteTransaction: ReplicaStore {
    package func replicaIdentity() throws -> ReplicaIdentity? {
        try connection.mapErrors {
            try connection.fetchOne("SELECT source, user_id, client_id FROM replica_state WHERE id = 1") { row in
                ReplicaIdentity(source: row.string(at: 0), userID: row.string(at: 1), clientID: row.string(at: 2))
            }
        }
    }

    package func startReplica(_ identity: ReplicaIdentity) throws {
        let counts = try counts()
        guard counts.users == 0, counts.posts == 0, counts.events == 0 else {
            throw StorageError.constraintViolation(field: "database", reason: "a replica starts empty; this database has data")
        }
        try connection.mapErrors {
            try connection.run(
                "INSERT INTO replica_state (id, source, user_id, client_id) VALUES (1, ?, ?, ?)", identity.source, identity.userID,
                identity.clientID)
        }
    }

    package func replicaCursor() throws -> ReplicaCursor {
        try replicaProgress(recentRejections: 0).cursor
    }

    package func replicaProgress(recentRejections limit: Int) throws -> ReplicaProgress {
        try connection.mapErrors {
            let state = try connection.fetchOne(
                """
                SELECT synced_seq, bulk_generation, pushed_through, last_sync_at, last_error,
                       (SELECT count(*) FROM replica_mutations WHERE rejected IS NULL),
                       (SELECT count(*) FROM replica_mutations WHERE rejected IS NOT NULL),
                       synced_check
                FROM replica_state WHERE id = 1
                """
            ) { row in
                (
                    cursor: ReplicaCursor(
                        syncedSeq: row.isNull(at: 3) ? nil : row.int64(at: 0), syncedCheck: row.optionalInt64(at: 7),
                        bulkGeneration: row.int64(at: 1),
                        pushedThrough: row.int64(at: 2)),
                    lastSyncAt: row.optionalInt64(at: 3).map { date(millis: $0) }, lastError: row.optionalString(at: 4),
                    pending: row.int(at: 5), rejected: row.int(at: 6)
                )
            }
            guard let state else { throw StorageError.constraintViolation(field: "database", reason: "not a replica") }
            let recent =
                limit <= 0
                ? []
                : try connection.fetchAll(
                    "SELECT number, rejected FROM replica_mutations WHERE rejected IS NOT NULL ORDER BY number DESC LIMIT ?", limit
                ) { SyncRejectionRecord(number: $0.int64(at: 0), reason: $0.string(at: 1)) }
            return ReplicaProgress(
                cursor: state.cursor, lastSyncAt: state.lastSyncAt, lastError: state.lastError, pending: state.pending,
                rejected: state.rejected, recentRejections: recent)
        }
    }

    package func recordPull(through seq: Int64, check: Int64?, bulkGeneration: Int64, at time: Date) throws {
        try connection.mapErrors {
            try connection.run(
                """
                UPDATE replica_state SET synced_seq = ?, synced_check = ?, bulk_generation = ?, last_sync_at = ?, last_error = NULL
                WHERE id = 1
                """,
                seq, check, bulkGeneration, millis(time))
        }
    }

    package func recordPush(through number: Int64) throws {
        try connection.mapErrors {
            try connection.run("UPDATE replica_state SET pushed_through = max(pushed_through, ?) WHERE id = 1", number)
        }
    }

    package func recordSyncError(_ message: String?) throws {
        try connection.mapErrors { try connection.run("UPDATE replica_state SET last_error = ? WHERE id = 1", message) }
    }

    package func enqueueMutation(_ kind: ReplicaMutation.Kind, postID: String, body: String?, at time: Date) throws -> Int64 {
        try connection.mapErrors {
            try connection.run(
                "INSERT INTO replica_mutations (kind, post_id, body, at) VALUES (?, ?, ?, ?)", Self.stored(kind), postID, body,
                millis(time))
            return connection.lastInsertRowID
        }
    }

    package func pendingMutations(after number: Int64, limit: Int) throws -> [ReplicaMutation] {
        try connection.mapErrors {
            try connection.fetchAll(
                "SELECT number, kind, post_id, body FROM replica_mutations WHERE rejected IS NULL AND number > ? ORDER BY number LIMIT ?",
                number, limit
            ) { row in
                let kind: ReplicaMutation.Kind =
                    switch row.string(at: 1) {
                    case "like": .like
                    case "unlike": .unlike
                    default: .createPost
                    }
                return ReplicaMutation(number: row.int64(at: 0), kind: kind, postID: row.string(at: 2), body: row.optionalString(at: 3))
            }
        }
    }

    package func rejectMutations(_ rejections: [SyncRejectionRecord]) throws -> [String] {
        try connection.mapErrors {
            var posts: [String] = []
            for rejection in rejections {
                let postID = try connection.fetchOne(
                    "SELECT post_id FROM replica_mutations WHERE number = ? AND rejected IS NULL", rejection.number
                ) {
                    $0.string(at: 0)
                }
                guard let postID else { continue }
                try connection.run("UPDATE replica_mutations SET rejected = ? WHERE number = ?", rejection.reason, rejection.number)
                posts.append(postID)
            }
            return posts
        }
    }

    package func confirmMutations(through number: Int64) throws -> [String] {
        try connection.mapErrors {
            let posts = try connection.fetchAll(
                "SELECT DISTINCT post_id FROM replica_mutations WHERE number <= ? AND rejected IS NULL ORDER BY post_id", number
            ) { $0.string(at: 0) }
            try connection.run("DELETE FROM replica_mutations WHERE number <= ? AND rejected IS NULL", number)
            return posts
        }
    }

    package func keepBase(of postID: String, userKey: Int64) throws {
        try connection.mapErrors {
            try connection.run(
                """
                INSERT INTO replica_base (post_id, liked, like_count)
                SELECT p.id, EXISTS (SELECT 1 FROM likes l WHERE l.post_key = p.post_key AND l.user_key = ?2), p.like_count
                FROM posts p WHERE p.id = ?1
                ON CONFLICT (post_id) DO NOTHING
                """, postID, userKey)
        }
    }

    package func replicaPost(_ postID: String, userKey: Int64) throws -> ReplicaPostState? {
        try connection.mapErrors {
            try connection.fetchOne(
                """
                SELECT p.post_key, p.like_count, EXISTS (SELECT 1 FROM likes l WHERE l.post_key = p.post_key AND l.user_key = ?2),
                       b.liked, b.like_count,
                       (SELECT m.kind FROM replica_mutations m
                        WHERE m.post_id = p.id AND m.rejected IS NULL AND m.kind <> 'post' ORDER BY m.number DESC LIMIT 1)
                FROM posts p LEFT JOIN replica_base b ON b.post_id = p.id
                WHERE p.id = ?1
                """, postID, userKey
            ) { row in
                ReplicaPostState(
                    postKey: row.int64(at: 0), shownLiked: row.bool(at: 2), shownCount: row.int(at: 1),
                    base: row.isNull(at: 3) ? nil : ReplicaPostState.Base(liked: row.bool(at: 3), likeCount: row.int(at: 4)),
                    intent: row.optionalString(at: 5).map { $0 == "like" })
            }
        }
    }

    package func setBase(of postID: String, to base: ReplicaPostState.Base?) throws {
        try connection.mapErrors {
            if let base {
                try connection.run(
                    """
                    INSERT INTO replica_base (post_id, liked, like_count) VALUES (?, ?, ?)
                    ON CONFLICT (post_id) DO UPDATE SET liked = excluded.liked, like_count = excluded.like_count
                    """, postID, base.liked, base.likeCount)
            } else {
                try connection.run("DELETE FROM replica_base WHERE post_id = ?", postID)
            }
        }
    }

    package func setShownLike(_ liked: Bool, userKey: Int64, postKey: Int64, at time: Date) throws {
        try connection.mapErrors {
            if liked {
                try connection.run("INSERT INTO likes (user_key, post_key, created_at) VALUES (?, ?, ?)", userKey, postKey, millis(time))
            } else {
                try connection.run("DELETE FROM likes WHERE user_key = ? AND post_key = ?", userKey, postKey)
            }
        }
    }

    package func setShownLikeCount(_ count: Int, postKey: Int64) throws {
        try connection.mapErrors { try connection.run("UPDATE posts SET like_count = ? WHERE post_key = ?", count, postKey) }
    }

    package func setPostCreatedAt(_ millis: Int64, postID: String) throws {
        try connection.mapErrors {
            try connection.run("UPDATE posts SET created_at = ?1 WHERE id = ?2 AND created_at <> ?1", millis, postID)
        }
    }

    package func nameUser(_ id: String, name: String) throws {
        try connection.mapErrors { try connection.run("UPDATE users SET name = ?1 WHERE id = ?2 AND name = '' AND ?1 <> ''", name, id) }
    }

    private static func stored(_ kind: ReplicaMutation.Kind) -> String {
        switch kind {
        case .like: "like"
        case .unlike: "unlike"
        case .createPost: "post"
        }
    }
}
