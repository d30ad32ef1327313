import FeedCore
import FeedPostgresBackend
import FeedTestSupport
import Foundation
import Testing

@Suite struct RedactionTests {
    @Test(arguments: [
        ("postgresql://app:s3cret@db:5432/feed?sslmode=require", "postgresql://app@db:5432/feed?sslmode=require"),
        ("postgres://app:s3cret@db/feed", "postgres://app@db/feed"),
        ("postgresql://app:p%40ss%2Fword@db/feed", "postgresql://app@db/feed"),
        ("postgresql://app@db/feed?password=s3cret&sslmode=verify-full", "postgresql://app@db/feed?sslmode=verify-full"),
        ("postgresql://db/feed?sslmode=disable&password=s3cret", "postgresql://db/feed?sslmode=disable"),
        ("postgresql://db/feed?pass%77ord=s3cret", "postgresql://db/feed"),
        (
            "postgresql://app:s3cret@host1:5432,host2:5433/feed?target_session_attrs=read-write",
            "postgresql://app@host1:5432,host2:5433/feed?target_session_attrs=read-write"
        ),
        ("postgresql://app:s3c@ret@db/feed", "postgresql://app@db/feed"),
        ("postgresql://app:s3c?ret@db/feed", "postgresql://app:***@db/feed"),
        ("postgresql://app@db/feed", "postgresql://app@db/feed"),
        ("postgresql://", "postgresql://"),
        ("postgresql:///feed?host=/var/run/postgresql", "postgresql:///feed?host=/var/run/postgresql"),
        ("host=db password=s3cret", "(not a postgresql:// URL)"),
    ])
    func theLocationNeverShowsThePassword(url: String, expected: String) {
        let redacted = PostgresBackend.redacted(url)
        #expect(redacted == expected)
        #expect(!redacted.contains("s3cret"))
        #expect(!redacted.contains("s3c"))
    }

    @Test func aPasswordEqualToTheUserNameLeavesTheRestReadable() {
        #expect(PostgresBackend.redacted("postgresql://postgres:postgres@db/postgres") == "postgresql://postgres@db/postgres")
        #expect(PostgresBackend.redacted("postgresql://app:db@db/db?password=db") == "postgresql://app@db/db")
    }

    @Test func theBackendsLocationAndErrorsOmitThePassword() throws {
        guard let server = PostgresTestDatabase.serverURL else { return }
        // The test server trusts its clients or knows their password; a wrong one in the URL may or may not be used.
        let withPassword = server.replacingOccurrences(of: "://", with: "://") + (server.contains("?") ? "&" : "?") + "password=hunter2"
        if let backend = try? PostgresBackend(url: withPassword, mode: .inspect) {
            #expect(!backend.location.contains("hunter2"))
            backend.close()
        } else {
            let error = try #require(throws: StorageError.self) { try PostgresBackend(url: withPassword, mode: .inspect) }
            #expect(!error.description.contains("hunter2"))
        }
        let bad = PostgresAdmin.url(withPassword, database: "no_such_database_feedsync")
        let error = try #require(throws: StorageError.self) { try PostgresBackend(url: bad) }
        #expect(!error.description.contains("hunter2"))
        #expect(!String(reflecting: error).contains("hunter2"))
    }

    @Test func aDatabaseURLKeepsEverythingButThePath() {
        #expect(
            PostgresAdmin.url("postgresql://app:pw@db:5432/postgres?sslmode=require&dbname=x", database: "fs_test")
                == "postgresql://app:pw@db:5432/fs_test?sslmode=require")
        #expect(PostgresAdmin.url("postgresql://db", database: "fs_test") == "postgresql://db/fs_test")
        #expect(PostgresAdmin.isValidDatabaseName("fs_a1"))
        #expect(!PostgresAdmin.isValidDatabaseName("fs-a"))
        #expect(!PostgresAdmin.isValidDatabaseName("1fs"))
        #expect(!PostgresAdmin.isValidDatabaseName("x; DROP DATABASE postgres"))
        #expect(throws: StorageError.self) { try PostgresAdmin.createDatabase(url: "postgresql://db", name: "Bad Name") }
    }
}
