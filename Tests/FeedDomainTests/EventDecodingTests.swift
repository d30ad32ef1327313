@testable import FeedDomain
import FeedCore
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// Reading the log never guesses: an event of a kind this binary does not know is a typed error, on both backends.
// Blocks: database calls on the test's thread.
@Suite(.ownThreads) struct EventDecodingTests {
    /// Writes an event of kind `reposted` at seq 100 behind the schema's back, as a newer FeedSync might.
    static func insertRepost(into service: FeedService, on backend: TestBackend) throws {
        _ = try service.backend.write(
            { tx in
                switch backend {
                case .sqlite:
                    try tx.userStatements.execute("PRAGMA ignore_check_constraints = ON")
                case .postgresql:
                    try tx.userStatements.execute("ALTER DOMAIN feedsync_event_kind DROP CONSTRAINT feedsync_event_kind_check")
                }
                try tx.userStatements.execute(
                    "INSERT INTO events (seq, kind, user_id, post_id, like_count, at) VALUES ($1, $2, $3, $4, NULL, $5)",
                    [.integer(100), .text("reposted"), .text("user1"), .text("post1"), .integer(1_700_000_000_000)])
                if backend == .sqlite { try tx.userStatements.execute("PRAGMA ignore_check_constraints = OFF") }
            }, afterCommit: { _ in })
    }

    @Test(arguments: TestBackend.allCases)
    func anUnknownKindIsATypedErrorNamingKindSeqAndSchema(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        defer { service.close() }
        let before = try service.events(after: 0)
        try Self.insertRepost(into: service, on: backend)
        let schema = try service.backend.schemaStatus().databaseVersion
        let error = #expect(throws: FeedError.self) { try service.events(after: 0) }
        guard case .storage(.unknownEventKind(let kind, let seq, let version)) = error else {
            Issue.record("expected unknownEventKind, got \(String(describing: error))")
            return
        }
        #expect(kind == "reposted" && seq == 100 && version == schema && version > 0)
        let text = String(describing: error ?? .serviceClosed)
        #expect(text.contains("reposted") && text.contains("100") && text.contains("newer FeedSync"), "\(text)")
        // The events before it still read; reading from past it reads nothing of it.
        #expect(try service.events(after: 0, limit: before.count) == before)
        #expect(try service.events(after: 100).isEmpty)
    }
}
