internal import FeedPostgresBackend
internal import Foundation

/// A fresh, uniquely named database on the PostgreSQL test server, for one test.
///
/// The server is given by `FEEDSYNC_TEST_POSTGRES_URL`, a `postgresql://` URL whose role may `CREATEDB`. When the
/// variable is unset, ``make(_:)`` returns `nil` (the test skips itself) and prints one notice per process to
/// standard error — unless `CI` is `true`, where it throws, so that CI cannot pass without PostgreSQL.
///
/// ```swift
/// guard let database = try PostgresTestDatabase.make("migrations") else { return }
/// defer { database.drop() }
/// let backend = try PostgresBackend(url: database.url)
/// ```
public final class PostgresTestDatabase: Sendable {
    /// The environment variable naming the test server.
    public static let variable = "FEEDSYNC_TEST_POSTGRES_URL"

    /// The URL of the new database (the test server's URL with its database replaced).
    public let url: String
    /// The database's name: `fs_<label>_<random>`, only `a–z 0–9 _`.
    public let name: String
    /// The test server's URL, used to drop the database.
    public let serverURL: String

    private init(url: String, name: String, serverURL: String) {
        self.url = url
        self.name = name
        self.serverURL = serverURL
    }

    /// The test server's URL, or `nil` when `FEEDSYNC_TEST_POSTGRES_URL` is unset or empty.
    public static var serverURL: String? {
        guard let url = ProcessInfo.processInfo.environment[variable], !url.isEmpty else { return nil }
        return url
    }

    /// Creates a fresh database named after `label`.
    ///
    /// - Returns: the database, or `nil` when no test server is configured (after a one-time notice).
    /// - Throws: ``NotConfigured`` when no server is configured and `CI` is `true`; the server's error when the
    ///   database cannot be created.
    public static func make(_ label: String) throws -> PostgresTestDatabase? {
        guard let serverURL else {
            if ProcessInfo.processInfo.environment["CI"] == "true" { throw NotConfigured() }
            _ = skipNotice
            return nil
        }
        let name = uniqueName(label)
        try PostgresAdmin.createDatabase(url: serverURL, name: name)
        return PostgresTestDatabase(url: PostgresAdmin.url(serverURL, database: name), name: name, serverURL: serverURL)
    }

    /// Drops the database, ending any session still connected to it (`WITH (FORCE)`); failures are ignored.
    public func drop() {
        try? PostgresAdmin.dropDatabase(url: serverURL, name: name)
    }

    /// A database name from `label`: `fs_`, the label lowercased with anything outside `a–z 0–9 _` turned into `_`
    /// (at most 30 characters), and 16 random hex digits.
    static func uniqueName(_ label: String) -> String {
        let cleaned = String(
            label.lowercased().unicodeScalars.prefix(30).map { scalar -> Character in
                switch scalar {
                case "a"..."z", "0"..."9", "_": Character(scalar)
                default: "_"
                }
            })
        let random = String(UInt64.random(in: 0...UInt64.max), radix: 16)
        return "fs_\(cleaned)_\(String(repeating: "0", count: 16 - random.count))\(random)"
    }

    /// Printed once per process when the tests are skipped.
    private static let skipNotice: Void = {
        FileHandle.standardError.write(
            Data(
                "PostgreSQL tests skipped: set \(variable) to a postgresql:// URL whose role has CREATEDB to run them.\n".utf8))
    }()

    /// No PostgreSQL test server is configured, on CI (`CI=true`), where the PostgreSQL tests must run.
    public struct NotConfigured: Error, CustomStringConvertible {
        /// What to set.
        public var description: String {
            "PostgreSQL tests cannot be skipped on CI: set \(PostgresTestDatabase.variable) to a postgresql:// URL whose role has CREATEDB"
        }
    }
}
