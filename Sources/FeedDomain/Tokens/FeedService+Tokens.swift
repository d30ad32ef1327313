internal import FeedChecksum
internal import FeedCore
internal import FeedDependencies
internal import Foundation

/// API tokens: how `feedsync serve` knows who sends a request (`Authorization: Bearer TOKEN`).
///
/// A token's text is `fst_<id>_<secret>`: `id` is 12 lowercase hex digits, public (lists and revocation name a token
/// by it), and `secret` is 32 random bytes from `SystemRandomNumberGenerator` in base64url without padding (43
/// characters). The database stores the SHA-256 of the whole text, never the text: a copy of the database
/// authenticates nobody. ``authenticate(token:)`` looks the hash up on every call — no cache — so a revoked token
/// fails at once, in every process using the database.
///
/// A token's text never appears in an error's description, a log event or a value's `description`.
extension FeedService {
    /// The token text's first part.
    static let tokenPrefix = "fst_"
    /// Hex digits in a token id.
    static let tokenIDLength = 12
    /// Characters of a token's secret: 32 bytes in base64url without padding.
    static let tokenSecretLength = 43

    /// Issues a token for a user and returns its text, which exists nowhere else afterwards: the database keeps
    /// only its SHA-256.
    ///
    /// ```swift
    /// let issued = try service.issueToken(userID: "user1", label: "phone")
    /// print(issued.token)   // fst_3f9a0c1b7d2e_bL4…, shown once
    /// ```
    ///
    /// - Parameters:
    ///   - userID: an existing user, whom the token acts as.
    ///   - label: a note for ``tokens()-99ucb`` (up to 200 characters, no NUL).
    /// - Throws: ``FeedError/userNotFound(_:)``, ``FeedError/invalidValue(field:value:reason:)`` (the user id or the
    ///   label).
    public func issueToken(userID: String, label: String = "") throws(FeedError) -> IssuedToken {
        try checkOpen()
        try validateID(userID, field: "user id")
        try validate(label, field: "token label", Validation.checkName)
        let now = date.now
        return try commit(value: userID, command: "issueToken") { tx, _ in
            guard try tx.userKey(for: userID) != nil else { throw StorageError.userNotFound(userID) }
            // 48 random bits per id: a taken one is drawn again (as is its secret), and never in practice twice.
            for _ in 0..<8 {
                let issued = Self.newToken(userID: userID)
                if try tx.tokens.insertToken(id: issued.id, userID: userID, hash: Self.tokenHash(issued.token), label: label, at: now) {
                    return issued
                }
            }
            throw StorageError.constraintViolation(field: "token id", reason: "no free token id was drawn")
        }
    }

    /// Every token, valid or revoked, in the order they were issued (ties by id); never their text or hash.
    ///
    /// - Throws: a database error only.
    public func tokens() throws(FeedError) -> [TokenInfo] {
        try checkOpen()
        do {
            return try backend.readOnce { tx in
                try tx.tokens.tokens().map { token in
                    TokenInfo(
                        id: token.id, userID: token.userID, label: token.label, createdAt: token.createdAt, revokedAt: token.revokedAt)
                }
            }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Revokes a token: from the commit on, ``authenticate(token:)-5ego7`` returns `nil` for it in every process.
    ///
    /// - Parameter id: the token's id (12 lowercase hex digits, as ``tokens()-99ucb`` lists it).
    /// - Returns: `true` when this call revoked it; `false` when no token has this id or it was revoked already.
    /// - Throws: ``FeedError/invalidValue(field:value:reason:)`` for an id of another shape — without quoting it, as
    ///   it may be a whole token pasted by mistake.
    @discardableResult
    public func revokeToken(id: String) throws(FeedError) -> Bool {
        try checkOpen()
        guard Self.isTokenID(id.utf8) else {
            throw FeedError.invalidValue(
                field: "token id", value: "", reason: "a token id is \(Self.tokenIDLength) lowercase hex digits, as 'token list' shows")
        }
        let now = date.now
        return try commit(value: id, command: "revokeToken") { tx, _ in try tx.tokens.revokeToken(id: id, at: now) }
    }

    /// The user a token acts as: `nil` for a malformed, unknown or revoked token.
    ///
    /// Cheap enough for every request: a malformed text is answered `nil` at once, without touching the database
    /// (even on a closed service); a well-formed one costs one SHA-256 and one statement, a lookup of its hash (a bound value) through the unique index.
    /// Nothing is cached, so a revocation committed by any process counts from the next call.
    ///
    /// - Throws: a database error only (its description never holds the token).
    public func authenticate(token: String) throws(FeedError) -> String? {
        guard let id = Self.tokenID(in: token) else { return nil }
        try checkOpen()
        let hash = Self.tokenHash(token)
        do {
            return try backend.readOnce { tx in
                try tx.tokens.tokenUser(hash: hash, id: id)
            }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    // MARK: - Token text

    /// A new token for `userID`: a random id and secret.
    private static func newToken(userID: String) -> IssuedToken {
        var generator = SystemRandomNumberGenerator()
        let idBytes = (0..<tokenIDLength / 2).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let secret = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        let hex = Array("0123456789abcdef".utf8)
        let id = String(decoding: idBytes.flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 0xF)]] }, as: UTF8.self)
        return IssuedToken(id: id, userID: userID, token: tokenPrefix + id + "_" + base64URL(secret))
    }

    /// The hex SHA-256 of a token's whole text: what the database stores and looks up.
    static func tokenHash(_ token: String) -> String {
        SHA256.hexDigest(of: Array(token.utf8))
    }

    /// The id of a well-formed token text (`fst_`, 12 lowercase hex digits, `_`, 43 base64url characters), else
    /// `nil`. Looks at the bytes only.
    static func tokenID(in token: String) -> String? {
        let bytes = Array(token.utf8)
        let prefix = Array(tokenPrefix.utf8)
        let idEnd = prefix.count + tokenIDLength
        guard bytes.count == idEnd + 1 + tokenSecretLength, bytes.starts(with: prefix), bytes[idEnd] == UInt8(ascii: "_"),
            isTokenID(bytes[prefix.count..<idEnd]), bytes[(idEnd + 1)...].allSatisfy(isBase64URL)
        else { return nil }
        // The last character carries 4 bits of the secret and 2 zero bits: only the canonical encoding is accepted.
        guard let last = bytes.last, let value = base64URLAlphabet.firstIndex(of: last), value & 0b11 == 0 else { return nil }
        return String(decoding: bytes[prefix.count..<idEnd], as: UTF8.self)
    }

    /// Whether `bytes` are 12 lowercase hex digits.
    private static func isTokenID<C: Collection<UInt8>>(_ bytes: C) -> Bool {
        let digits = UInt8(ascii: "0")...UInt8(ascii: "9")
        let letters = UInt8(ascii: "a")...UInt8(ascii: "f")
        return bytes.count == tokenIDLength && bytes.allSatisfy { digits.contains($0) || letters.contains($0) }
    }

    private static let base64URLAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    private static func isBase64URL(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }

    /// `bytes` in base64url (RFC 4648 §5) without padding.
    static func base64URL(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let b0 = UInt32(bytes[index])
            let b1 = index + 1 < bytes.count ? UInt32(bytes[index + 1]) : 0
            let b2 = index + 2 < bytes.count ? UInt32(bytes[index + 2]) : 0
            let group = b0 << 16 | b1 << 8 | b2
            let characters = min(4, (bytes.count - index) * 4 / 3 + ((bytes.count - index) < 3 ? 1 : 0))
            for shift in stride(from: 18, through: 18 - 6 * (characters - 1), by: -6) {
                output.append(base64URLAlphabet[Int((group >> UInt32(shift)) & 0x3F)])
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}
