package import FeedCore
internal import FeedSQLite
package import Foundation

/// The source's side of replica sync on SQLite (`sync_clients`, `sync_rejections`, and the reads of a pull step).
extension SQLiteTransaction: FeedSyncSource {
    package func syncClient(_ clientID: String) throws -> SyncClientRecord? {
        try connection.mapErrors {
            try connection.fetchOne(
                "SELECT user_id, last_mutation, last_mutation_seq FROM sync_clients WHERE client_id = ?", clientID, decode: Self.client)
        }
    }

    package func claimSyncClient(_ clientID: String, userID: String, at time: Date) throws -> SyncClientRecord {
        try connection.mapErrors {
            try connection.run(
                "INSERT INTO sync_clients (client_id, user_id, updated_at) VALUES (?, ?, ?) ON CONFLICT (client_id) DO NOTHING",
                clientID, userID, millis(time))
            // The single writer orders two pushes of one client already.
            try connection.run("UPDATE sync_clients SET updated_at = ? WHERE client_id = ?", millis(time), clientID)
            guard
                let client = try connection.fetchOne(
                    "SELECT user_id, last_mutation, last_mutation_seq FROM sync_clients WHERE client_id = ?", clientID,
                    decode: Self.client)
            else { throw StorageError.constraintViolation(field: "client id", reason: "its record vanished") }
            return client
        }
    }

    package func recordSyncHandled(clientID: String, through number: Int64, lastSeq: Int64) throws {
        try connection.mapErrors {
            try connection.run(
                "UPDATE sync_clients SET last_mutation = ?, last_mutation_seq = ? WHERE client_id = ?", number, lastSeq, clientID)
        }
    }

    package func recordSyncRejections(_ rejections: [SyncRejectionRecord], clientID: String, at time: Date) throws {
        try connection.mapErrors {
            for rejection in rejections {
                try connection.run(
                    "INSERT INTO sync_rejections (client_id, mutation, reason, at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    clientID, rejection.number, rejection.reason, millis(time))
            }
        }
    }

    package func syncRejections(clientID: String, numbers: ClosedRange<Int64>) throws -> [SyncRejectionRecord] {
        try connection.mapErrors {
            try connection.fetchAll(
                "SELECT mutation, reason FROM sync_rejections WHERE client_id = ? AND mutation BETWEEN ? AND ? ORDER BY mutation",
                clientID, numbers.lowerBound, numbers.upperBound
            ) { SyncRejectionRecord(number: $0.int64(at: 0), reason: $0.string(at: 1)) }
        }
    }

    /// Asks a hundred ids at a time with one statement text (unused places repeat an id): a push holds at most
    /// 1,000 mutations, so at most ten statements, each a search of the unique index.
    package func existingPostIDs(_ ids: [String]) throws -> Set<String> {
        let chunk = 100
        let sql = "SELECT id FROM posts WHERE id IN (" + Array(repeating: "?", count: chunk).joined(separator: ", ") + ")"
        let all = Set(ids).sorted()
        var found = Set<String>()
        try connection.mapErrors {
            let statement = try connection.cachedStatement(sql)
            for start in stride(from: 0, to: all.count, by: chunk) {
                let slice = all[start..<min(start + chunk, all.count)]
                statement.reset()
                try statement.bind(values: (0..<chunk).map { slice[slice.startIndex + min($0, slice.count - 1)] as any SQLiteBindable })
                while try statement.step() { found.insert(statement.row.string(at: 0)) }
            }
            statement.reset()
        }
        return found
    }

    package func syncEvents(after seq: Int64, limit: Int) throws -> [SyncSourceEvent] {
        let log = EventLog(connection)
        return try connection.mapErrors {
            try connection.fetchAll(
                """
                SELECT e.seq, e.kind, e.user_id, e.post_id, e.like_count, e.at,
                       CASE WHEN e.kind = 'userCreated' THEN (SELECT u.name FROM users u WHERE u.id = e.user_id) END,
                       CASE WHEN e.kind = 'postCreated' THEN (SELECT p.body FROM posts p WHERE p.id = e.post_id) END
                FROM events e
                WHERE e.seq > ? ORDER BY e.seq LIMIT ?
                """, seq, limit
            ) { row in
                SyncSourceEvent(record: try log.decode(row), userName: row.optionalString(at: 6), postBody: row.optionalString(at: 7))
            }
        }
    }

    package func snapshotUsers(after id: String?, limit: Int) throws -> [User] {
        try connection.mapErrors {
            try connection.fetchAll("SELECT id, name, created_at FROM users WHERE id > ? ORDER BY id LIMIT ?", id ?? "", limit) { row in
                User(id: row.string(at: 0), name: row.string(at: 1), createdAt: date(millis: row.int64(at: 2)))
            }
        }
    }

    package func snapshotPosts(viewerKey: Int64, after cursor: FeedCursor?, limit: Int) throws -> [FeedRow] {
        let after = cursor ?? FeedCursor(createdAtMillis: .min, sequence: .min)
        return try connection.mapErrors {
            try connection.fetchAll(
                """
                SELECT p.id, p.author_id, p.body, p.created_at, p.like_count, p.post_key,
                       EXISTS (SELECT 1 FROM likes l WHERE l.user_key = ?1 AND l.post_key = p.post_key)
                FROM posts p
                WHERE (p.created_at, p.post_key) > (?2, ?3)
                ORDER BY p.created_at, p.post_key
                LIMIT ?4
                """, viewerKey, after.createdAtMillis, after.sequence, limit
            ) { row in FeedRow(post: PostRepository.decode(row), liked: row.bool(at: 6)) }
        }
    }

    private static func client(_ row: Row) -> SyncClientRecord {
        SyncClientRecord(userID: row.string(at: 0), lastMutation: row.int64(at: 1), lastMutationSeq: row.int64(at: 2))
    }
}
