public import FeedCore
internal import FeedSQLite
package import Foundation

/// API tokens on SQLite (`api_tokens`).
extension SQLiteTransaction: FeedTokenStore {
    package func insertToken(id: String, userID: String, hash: String, label: String, at time: Date) throws -> Bool {
        try connection.mapErrors {
            try connection.run(
                "INSERT INTO api_tokens (id, user_id, token_hash, label, created_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                id, userID, hash, label, millis(time)) == 1
        }
    }

    package func tokens() throws -> [TokenRecord] {
        try connection.mapErrors {
            try connection.fetchAll("SELECT id, user_id, label, created_at, revoked_at FROM api_tokens ORDER BY created_at, id") {
                row in
                TokenRecord(
                    id: row.string(at: 0), userID: row.string(at: 1), label: row.string(at: 2),
                    createdAt: date(millis: row.int64(at: 3)), revokedAt: row.optionalInt64(at: 4).map { date(millis: $0) })
            }
        }
    }

    package func revokeToken(id: String, at time: Date) throws -> Bool {
        try connection.mapErrors {
            try connection.run("UPDATE api_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", millis(time), id) == 1
        }
    }

    package func tokenUser(hash: String, id: String) throws -> String? {
        try connection.mapErrors { try connection.fetchOne(Self.tokenUserSQL, hash, id) { $0.string(at: 0) } }
    }

    /// The one statement of ``tokenUser(hash:id:)``: the hash, then the id; a search of the unique index.
    public static let tokenUserSQL = "SELECT user_id FROM api_tokens WHERE token_hash = ?1 AND id = ?2 AND revoked_at IS NULL"
}
