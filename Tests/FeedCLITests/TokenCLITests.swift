import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// `token issue`, `token list` and `token revoke`, run with the built `feedsync` on both backends: what each prints,
/// its exit statuses, and that no command but `token issue` ever prints a token or its hash.
///
/// The database is `feedsync demo`'s: users alice, bob and carol.
// Blocks: waits for `feedsync` child processes.
@Suite(.ownThreads) struct TokenCLITests {
    let home = TemporaryDirectory("feedsync-tokens")

    @discardableResult
    func feedsync(_ db: String, _ arguments: String...) throws -> CLIResult {
        try CLIRun.run(["--db", db] + arguments, environment: CLIRun.environment(home: home.path))
    }

    /// A database with the demo data on `backend`; `nil` when that backend's test server is not configured.
    func demoDatabase(on backend: TestBackend) throws -> String? {
        guard let db = try backend.makeLocation(in: home, "tokens") else { return nil }
        let demo = try feedsync(db, "demo")
        try #require(demo.status == 0, "\(demo.stderr)")
        return db
    }

    func json(_ text: String) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any], "not a JSON object: \(text)")
    }

    /// The user `db` authenticates `token` as, through a service of this process.
    func authenticate(_ token: String, on db: String) throws -> String? {
        let service = try FeedService(location: db)
        defer { service.close() }
        return try service.authenticate(token: token)
    }

    /// The stored hashes, read from the table.
    func storedHashes(on db: String) throws -> [String] {
        let service = try FeedService(location: db)
        defer { service.close() }
        return try service.backend.read { tx in try tx.userStatements.fetch("SELECT token_hash FROM api_tokens", []) }.compactMap {
            $0[0].text
        }
    }

    func expectOneLineFailure(_ result: CLIResult, status: Int32, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == status, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
        #expect(
            result.stderr.hasPrefix("Error: ") && result.stderr.split(separator: "\n").count == 1, "\(result.stderr)",
            sourceLocation: sourceLocation)
    }

    @Test(arguments: TestBackend.allCases)
    func issueListAndRevoke(on backend: TestBackend) throws {
        guard let db = try demoDatabase(on: backend) else { return }
        // Text: the token alone on stdout, the note on stderr.
        let issued = try feedsync(db, "token", "issue", "--user", "alice", "--label", "phone")
        #expect(issued.status == 0, "\(issued.stderr)")
        let token = String(issued.stdout.dropLast())
        #expect(issued.stdout == token + "\n")
        #expect(token.wholeMatch(of: #/fst_[0-9a-f]{12}_[A-Za-z0-9_-]{43}/#) != nil, "\(token)")
        let id = String(token.dropFirst(4).prefix(12))
        #expect(issued.stderr.contains("shown only this once") && issued.stderr.contains(id))
        #expect(!issued.stderr.contains(token))
        #expect(try authenticate(token, on: db) == "alice")

        // JSON: {"id","user","token"}.
        let second = try feedsync(db, "token", "issue", "--user", "bob", "--json")
        #expect(second.status == 0 && second.stderr.isEmpty, "\(second.stderr)")
        let object = try json(second.stdout)
        #expect(second.stdout.hasPrefix(#"{"id":""#) && object.count == 3)
        #expect(object["user"] as? String == "bob")
        let secondToken = try #require(object["token"] as? String)
        #expect(secondToken.hasPrefix("fst_\(try #require(object["id"] as? String))_"))
        #expect(try authenticate(secondToken, on: db) == "bob")

        // list: id, user, label, creation, revocation.
        let listed = try feedsync(db, "token", "list")
        #expect(listed.status == 0, "\(listed.stderr)")
        let lines = listed.stdout.split(separator: "\n").map(String.init)
        #expect(lines.first?.split(separator: " ", omittingEmptySubsequences: true) == ["TOKEN", "USER", "LABEL", "CREATED", "REVOKED"])
        let aliceLine = try #require(lines.first { $0.hasPrefix(id) })
        #expect(aliceLine.contains("alice") && aliceLine.contains("phone") && aliceLine.hasSuffix("-"))

        // revoke: at once, for every process.
        let revoked = try feedsync(db, "token", "revoke", id)
        #expect(revoked.status == 0, "\(revoked.stderr)")
        #expect(revoked.stdout == "Revoked token \(id).\n")
        #expect(try authenticate(token, on: db) == nil)
        #expect(try authenticate(secondToken, on: db) == "bob")
        let again = try feedsync(db, "token", "revoke", id, "--json")
        #expect(again.status == 0)
        #expect(again.stdout == #"{"id":"\#(id)","revoked":true,"changed":false}"# + "\n")

        let listedJSON = try feedsync(db, "token", "list", "--json")
        let tokens = try #require(try json(listedJSON.stdout)["tokens"] as? [[String: Any]])
        #expect(tokens.count == 2)
        let alice = try #require(tokens.first { $0["id"] as? String == id })
        #expect(Set(alice.keys) == ["id", "user", "label", "createdAt", "revokedAt"])
        #expect(alice["user"] as? String == "alice" && alice["label"] as? String == "phone")
        #expect(alice["revokedAt"] is String)
        #expect(tokens.first { $0["id"] as? String != id }?["revokedAt"] is NSNull)

        // Neither list nor status ever prints a token or a hash.
        let hashes = try storedHashes(on: db)
        #expect(hashes.count == 2)
        let printed = [
            listed, listedJSON, try feedsync(db, "status"), try feedsync(db, "status", "--json"), revoked, again,
        ]
        for result in printed {
            for secret in [token, secondToken] + hashes {
                #expect(!result.stdout.contains(secret) && !result.stderr.contains(secret))
            }
        }
    }

    @Test(arguments: TestBackend.allCases)
    func failuresAreOneLineWithTheirStatus(on backend: TestBackend) throws {
        guard let db = try demoDatabase(on: backend) else { return }
        expectOneLineFailure(try feedsync(db, "token", "revoke", "0123456789ab"), status: 65)
        #expect(try feedsync(db, "token", "revoke", "0123456789ab").stderr.contains("no token \"0123456789ab\""))
        expectOneLineFailure(try feedsync(db, "token", "issue", "--user", "zed"), status: 65)
        expectOneLineFailure(try feedsync(db, "token", "issue"), status: 64)
        expectOneLineFailure(
            try feedsync(db, "token", "issue", "--user", "alice", "--label", String(repeating: "x", count: 201)), status: 65)
        expectOneLineFailure(try feedsync(db, "token", "revoke"), status: 64)
        // A whole token pasted as the id: refused without being printed back.
        let issued = try feedsync(db, "token", "issue", "--user", "carol")
        let token = String(issued.stdout.dropLast())
        let pasted = try feedsync(db, "token", "revoke", token)
        expectOneLineFailure(pasted, status: 65)
        #expect(!pasted.stderr.contains(String(token.dropFirst(17))), "\(pasted.stderr)")
        #expect(try authenticate(token, on: db) == "carol", "nothing was revoked")
        // Nothing issued by the failures.
        #expect(try storedHashes(on: db).count == 1)
        let empty = try #require(try backend.makeLocation(in: home, "empty"))
        #expect(try feedsync(empty, "init").status == 0)
        let none = try feedsync(empty, "token", "list")
        #expect(none.status == 0 && none.stdout.isEmpty && none.stderr.contains("No tokens yet"))
    }

    @Test func helpDescribesTheTokenCommands() throws {
        let help = try CLIRun.run(["token", "issue", "--help"], environment: CLIRun.environment(home: home.path))
        #expect(help.status == 0)
        #expect(help.stdout.contains("Usage: feedsync token issue [--label TEXT]"))
        #expect(help.stdout.contains("only its SHA-256"))
        let group = try CLIRun.run(["token", "--help"], environment: CLIRun.environment(home: home.path))
        #expect(group.status == 0)
        #expect(["token issue", "token list", "token revoke"].allSatisfy { group.stdout.contains($0) }, "\(group.stdout)")
    }
}
