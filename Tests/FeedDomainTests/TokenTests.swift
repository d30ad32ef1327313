@testable import FeedDomain
import FeedCore
import FeedSQLiteBackend
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// API tokens on both backends: issuing, authenticating, listing and revoking, and what the database and the
/// service's texts may hold of a token (nothing but its hash).
// Blocks: waits for a `sha256sum` child process.
@Suite(.ownThreads) struct TokenTests {
    /// A well-formed token text: `fst_`, 12 lowercase hex digits, `_`, 43 base64url characters.
    static var shape: Regex<Substring> { #/fst_[0-9a-f]{12}_[A-Za-z0-9_-]{42}[AEIMQUYcgkosw048]/# }

    /// The synchronous forms, for the async tests (where a plain call picks the async overload).
    static func issue(_ service: FeedService, _ userID: String, label: String = "") throws -> IssuedToken {
        try service.issueToken(userID: userID, label: label)
    }

    static func authenticate(_ service: FeedService, _ token: String) throws -> String? {
        try service.authenticate(token: token)
    }

    static func tokens(_ service: FeedService) throws -> [TokenInfo] {
        try service.tokens()
    }

    @Test(arguments: TestBackend.allCases)
    func anIssuedTokenAuthenticatesItsUser(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        let issued = try Self.issue(service, "user2", label: "phone")
        #expect(issued.userID == "user2")
        #expect(issued.token.wholeMatch(of: Self.shape) != nil, "\(issued.token.count) characters")
        #expect(issued.token.hasPrefix("fst_\(issued.id)_"))
        #expect(try Self.authenticate(service, issued.token) == "user2")
        #expect(try await service.authenticate(token: issued.token) == "user2")
        let other = try await service.issueToken(userID: "user3")
        #expect(other.id != issued.id && other.token != issued.token)
        #expect(try Self.authenticate(service, other.token) == "user3")
        #expect(try Self.tokens(service).map(\.id).sorted() == [issued.id, other.id].sorted())
    }

    @Test(arguments: TestBackend.allCases)
    func aWrongSecretAnotherIDOrAMalformedTextAuthenticatesNobody(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        let issued = try Self.issue(service, "user1")
        let second = try Self.issue(service, "user2")
        let secret = String(issued.token.dropFirst(17))
        var flipped = Array(secret)
        flipped[5] = flipped[5] == "A" ? "B" : "A"
        let attempts = [
            "fst_\(issued.id)_" + String(flipped),  // a wrong secret
            "fst_\(second.id)_" + secret,  // the secret under another token's id
            "fst_\(issued.id)_" + String(second.token.dropFirst(17)),  // another token's secret
            String(issued.token.dropLast()),  // one character short
            issued.token + "A",  // one character more
            issued.token.uppercased(),
            "Bearer " + issued.token,
            " " + issued.token,
            issued.token.replacingOccurrences(of: "fst_", with: "fsx_"),
            "", "fst_", "fst_\(issued.id)_", "fst_\(issued.id)",
        ]
        for attempt in attempts {
            #expect(try Self.authenticate(service, attempt) == nil, "\(attempt)")
            #expect(try await service.authenticate(token: attempt) == nil, "\(attempt)")
        }
        #expect(try Self.authenticate(service, issued.token) == "user1", "the real one still works")
    }

    @Test func aMalformedTokenIsRefusedWithoutTouchingTheDatabase() async throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let issued = try Self.issue(service, "user1")
        service.close()
        // A closed service refuses every call that would read; a malformed text is answered before that.
        #expect(try Self.authenticate(service, "fst_short") == nil)
        #expect(try Self.authenticate(service, issued.token + "x") == nil)
        #expect(throws: FeedError.serviceClosed) { try Self.authenticate(service, issued.token) }
        #expect(try await service.authenticate(token: "fst_short") == nil)
        await #expect(throws: FeedError.serviceClosed) { try await service.authenticate(token: issued.token) }
        #expect(FeedService.tokenID(in: issued.token) == issued.id)
        // The secret's last character carries two zero bits: a non-canonical encoding of the same bytes is refused.
        #expect(FeedService.tokenID(in: String(issued.token.dropLast()) + "B") == nil)
    }

    @Test(arguments: TestBackend.allCases)
    func aRevokedTokenFailsAtOnceInEveryService(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try makeService(at: location)
        defer { service.close() }
        // Another process's view of the same database: its own service and connections.
        let server = try FeedService(location: location)
        defer { server.close() }
        let issued = try service.issueToken(userID: "user1", label: "laptop")
        let kept = try service.issueToken(userID: "user1")
        #expect(try server.authenticate(token: issued.token) == "user1")
        #expect(try service.revokeToken(id: issued.id))
        #expect(try server.authenticate(token: issued.token) == nil)
        #expect(try service.authenticate(token: issued.token) == nil)
        #expect(try server.authenticate(token: kept.token) == "user1", "only the revoked token fails")
        #expect(try service.revokeToken(id: issued.id) == false, "revoked already")
        #expect(try service.revokeToken(id: "0123456789ab") == false, "no such token")
        let listed = try server.tokens()
        #expect(listed.map(\.id) == [issued.id, kept.id].sorted())
        #expect(listed.first { $0.id == issued.id }?.revokedAt != nil)
        #expect(listed.first { $0.id == issued.id }?.label == "laptop")
        #expect(listed.first { $0.id == kept.id }?.revokedAt == nil)
    }

    @Test(arguments: TestBackend.allCases)
    func theDatabaseHoldsOnlyTheTokensHash(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        let issued = try service.issueToken(userID: "user3", label: "ci")
        let secret = String(issued.token.dropFirst(17))
        let rows = try service.backend.read { tx in
            try tx.userStatements.fetch("SELECT id, user_id, token_hash, label, created_at, revoked_at FROM api_tokens", [])
        }
        #expect(rows.count == 1)
        let row = try #require(rows.first)
        #expect(row[0] == .text(issued.id) && row[1] == .text("user3") && row[3] == .text("ci"))
        #expect(try row[2] == .text(SHA256Reference.hex(issued.token)))
        #expect(row[5] == .null)
        for value in row {
            let text = value.text ?? ""
            #expect(!text.contains(secret) && !text.contains(issued.token), "\(value)")
        }
    }

    @Test(arguments: TestBackend.allCases)
    func issuingForAnUnknownUserOrWithABadLabelFails(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        #expect(throws: FeedError.userNotFound("nobody")) { try service.issueToken(userID: "nobody") }
        #expect(throws: FeedError.self) { try service.issueToken(userID: "bad id") }
        let long = String(repeating: "x", count: 201)
        #expect(throws: FeedError.invalidValue(field: "token label", value: long, reason: "it is longer than 200 characters")) {
            try service.issueToken(userID: "user1", label: long)
        }
        #expect(try service.issueToken(userID: "user1", label: String(repeating: "x", count: 200)).userID == "user1")
        #expect(try service.tokens().count == 1, "the failed calls stored nothing")
    }

    @Test func noTextOfTheServiceShowsAToken() throws {
        let dir = TemporaryDirectory()
        let logged = LockedLog<FeedLogEvent>()
        var options = FeedOpenOptions()
        options.slowCommandThreshold = .zero
        let service = try makeService(at: dir.file("feed.sqlite"), options: options, logger: { logged.append($0) })
        defer { service.close() }
        let issued = try service.issueToken(userID: "user1")
        let secret = String(issued.token.dropFirst(17))
        _ = try service.authenticate(token: issued.token)
        _ = try service.revokeToken(id: issued.id)
        var texts = ["\(issued)", String(describing: issued), String(reflecting: issued)]
        var dumped = ""
        dump(issued, to: &dumped)
        texts.append(dumped)
        // A whole token given where an id belongs is refused without being quoted.
        do {
            _ = try service.revokeToken(id: issued.token)
            Issue.record("a token is no token id")
        } catch {
            texts.append(error.description)
        }
        texts += logged.values.map { "\($0.message) \($0.fields)" }
        #expect(!logged.values.isEmpty, "the slow-command log ran")
        for text in texts { #expect(!text.contains(secret), "\(text)") }
    }

    @Test func authenticationIsOneIndexSearchWithoutAScan() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        defer { service.close() }
        for user in ["user1", "user2", "user3"] { _ = try service.issueToken(userID: user) }
        let plan = try service.backend.read { tx in
            try tx.userStatements.fetch(
                "EXPLAIN QUERY PLAN " + SQLiteTransaction.tokenUserSQL, [.text(String(repeating: "0", count: 64)), .text("0123456789ab")])
        }
        let details = plan.compactMap { $0.last?.text }
        #expect(details.count == 1 && details.allSatisfy { $0.hasPrefix("SEARCH api_tokens USING") }, "\(details)")
    }

    @Test func base64URLEncodesWithoutPadding() {
        #expect(FeedService.base64URL([]) == "")
        #expect(FeedService.base64URL([0xFB]) == "-w")
        #expect(FeedService.base64URL([0xFB, 0xFF]) == "-_8")
        #expect(FeedService.base64URL(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(FeedService.base64URL(Array("fooba".utf8)) == "Zm9vYmE")
        #expect(FeedService.base64URL(Array(repeating: 0xFF, count: 32)).count == 43)
    }
}

/// The SHA-256 of a text as 64 hex digits, from `sha256sum`: a second implementation to check the stored hash with.
enum SHA256Reference {
    static func hex(_ text: String) throws -> String {
        let output = try SpawnedProcess.run("/usr/bin/env", ["sha256sum"], input: text).stdout
        return String(output.prefix(64))
    }
}
