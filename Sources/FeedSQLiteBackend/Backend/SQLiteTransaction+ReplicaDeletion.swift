internal import FeedCore
internal import FeedSQLite

/// What a replica needs to drop what its source deleted: tombstones, and the rows a snapshot page covers.
extension SQLiteTransaction {
    package func isDeletedPost(_ postID: String) throws -> Bool {
        try connection.mapErrors { try connection.fetchInt64("SELECT count(*) FROM deleted_posts WHERE id = ?", postID) == 1 }
    }

    package func userIDs(after: String?, through: String?) throws -> [String] {
        try connection.mapErrors {
            try connection.fetchAll(
                "SELECT id FROM users WHERE (?1 IS NULL OR id > ?1) AND (?2 IS NULL OR id <= ?2) ORDER BY id", after, through
            ) { $0.string(at: 0) }
        }
    }

    package func sourcePosts(createdFrom from: Int64?, before: Int64?) throws -> [(id: String, createdAt: Int64)] {
        try connection.mapErrors {
            try connection.fetchAll(
                """
                SELECT p.id, p.created_at FROM posts p
                WHERE p.created_at >= ?1 AND p.created_at < ?2
                  AND NOT EXISTS (SELECT 1 FROM replica_mutations m WHERE m.post_id = p.id AND m.kind = 'post')
                ORDER BY p.created_at, p.post_key
                """, from ?? .min, before ?? .max
            ) { (id: $0.string(at: 0), createdAt: $0.int64(at: 1)) }
        }
    }
}
