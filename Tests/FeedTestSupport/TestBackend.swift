public import Testing

/// The backends the conformance tests run on: every test taking a `TestBackend` runs once per backend.
public enum TestBackend: String, CaseIterable, Sendable, CustomTestStringConvertible {
    /// A SQLite file in a temporary directory.
    case sqlite
    /// A fresh database on the PostgreSQL test server (`FEEDSYNC_TEST_POSTGRES_URL`).
    case postgresql

    /// The backend's name in test reports.
    public var testDescription: String { rawValue }

    /// A fresh, empty database on this backend for one test, released with `dir`: a file in `dir`, or a new
    /// PostgreSQL database on the test server (dropped when `dir` is released). `nil` when the PostgreSQL test
    /// server is not configured (the test is then skipped; a notice says so once per run).
    public func makeLocation(in dir: TemporaryDirectory, _ name: String = "feed") throws -> String? {
        switch self {
        case .sqlite:
            return dir.file(name + ".sqlite")
        case .postgresql:
            guard let database = try PostgresTestDatabase.make(name) else { return nil }
            dir.onRelease { database.drop() }
            return database.url
        }
    }
}
