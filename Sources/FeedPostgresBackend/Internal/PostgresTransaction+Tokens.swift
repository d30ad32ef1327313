internal import FeedCore
internal import Foundation

/// API tokens on PostgreSQL (`api_tokens`).
extension PostgresTransaction: FeedTokenStore {
    func insertToken(id: String, userID: String, hash: String, label: String, at time: Date) throws -> Bool {
        try requireWritable()
        return try run(
            "INSERT INTO api_tokens (id, user_id, token_hash, label, created_at) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
            [.text(id), .text(userID), .text(hash), .text(label), .integer(millis(time))]
        ).changedRows == 1
    }

    func tokens() throws -> [TokenRecord] {
        let result = try run("SELECT id, user_id, label, created_at, revoked_at FROM api_tokens ORDER BY created_at, id")
        return (0..<result.rowCount).map { row in
            TokenRecord(
                id: result.string(row, 0) ?? "", userID: result.string(row, 1) ?? "", label: result.string(row, 2) ?? "",
                createdAt: date(millis: result.int64(row, 3) ?? 0), revokedAt: result.int64(row, 4).map { date(millis: $0) })
        }
    }

    func revokeToken(id: String, at time: Date) throws -> Bool {
        try requireWritable()
        return try run(
            "UPDATE api_tokens SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL", [.text(id), .integer(millis(time))]
        ).changedRows == 1
    }

    func tokenUser(hash: String, id: String) throws -> String? {
        let result = try run(
            "SELECT user_id FROM api_tokens WHERE token_hash = $1 AND id = $2 AND revoked_at IS NULL", [.text(hash), .text(id)])
        return result.rowCount > 0 ? result.string(0, 0) : nil
    }
}
