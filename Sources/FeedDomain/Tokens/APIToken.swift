public import Foundation

/// A token just issued by ``FeedService/issueToken(userID:label:)-43mop``: the only moment its text exists outside the
/// caller that sent it. The database keeps its SHA-256 alone, so the text cannot be shown again.
///
/// Its `description`, `debugDescription` and reflection (`dump`) name the token by ``id`` and never show
/// ``token``: printing or logging the value by mistake leaks nothing.
public struct IssuedToken: Sendable, Hashable {
    /// The token's public id: 12 lowercase hex digits, also the token text's second part.
    public let id: String
    /// The user the token acts as.
    public let userID: String
    /// The token's whole text, `fst_<id>_<secret>`: give it to the client once, for `Authorization: Bearer`.
    public let token: String

    /// Creates an issued token from its parts.
    public init(id: String, userID: String, token: String) {
        self.id = id
        self.userID = userID
        self.token = token
    }
}

extension IssuedToken: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// `token <id> of user <user>`, without the token's text.
    public var description: String { "token \(id) of user \(FeedError.quoted(userID))" }

    /// As ``description``: the token's text is never part of it.
    public var debugDescription: String { "IssuedToken(id: \(id), userID: \(FeedError.quoted(userID)), token: <redacted>)" }

    /// The id and user, with the token's text redacted.
    public var customMirror: Mirror {
        Mirror(self, children: ["id": id, "userID": userID, "token": "<redacted>"], displayStyle: .struct)
    }
}

/// What ``FeedService/tokens()-99ucb`` shows of a token: everything but its text or hash.
public struct TokenInfo: Sendable, Hashable, Codable {
    /// The token's public id: 12 lowercase hex digits.
    public let id: String
    /// The user the token acts as.
    public let userID: String
    /// A note from whoever issued it (up to 200 characters; empty when none was given).
    public let label: String
    /// When it was issued.
    public let createdAt: Date
    /// When it was revoked, `nil` while it is valid.
    public let revokedAt: Date?

    /// Creates a token's description.
    public init(id: String, userID: String, label: String, createdAt: Date, revokedAt: Date?) {
        self.id = id
        self.userID = userID
        self.label = label
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}
