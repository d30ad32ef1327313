package import Foundation

/// API tokens' storage (`api_tokens`): only hashes are stored, never a token's text.
///
/// Implemented by both backends' transactions; the domain reaches it through ``FeedTransaction/tokens``.
package protocol FeedTokenStore: AnyObject {
    /// Stores a new token of an existing user; `false` (nothing written) when a token has this id already.
    func insertToken(id: String, userID: String, hash: String, label: String, at time: Date) throws -> Bool
    /// Every token, valid or revoked, in the order they were issued (ties by id).
    func tokens() throws -> [TokenRecord]
    /// Marks a valid token revoked; `false` when no token has this id or it was revoked already.
    func revokeToken(id: String, at time: Date) throws -> Bool
    /// The user of the valid token with this hash and id, or `nil`: one lookup through the unique index of hashes.
    func tokenUser(hash: String, id: String) throws -> String?
}

/// A stored token as listed: never its text or hash.
package struct TokenRecord: Sendable, Hashable {
    package let id: String
    package let userID: String
    package let label: String
    package let createdAt: Date
    package let revokedAt: Date?

    package init(id: String, userID: String, label: String, createdAt: Date, revokedAt: Date?) {
        self.id = id
        self.userID = userID
        self.label = label
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}
