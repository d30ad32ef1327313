internal import FeedChecksum

/// One schema migration: a numbered SQL file of `Migrations/sqlite/` or `Migrations/postgresql/`, for either
/// backend's migrator.
public struct Migration: Sendable, Hashable {
    /// The schema version this migration brings the database to (the file's number).
    public let version: Int
    /// The file's description part, such as `create_schema`.
    public let name: String
    /// The SQL script (SQLite: run with `sqlite3_exec`; PostgreSQL: the simple query protocol), inside the
    /// migration's transaction.
    public let sql: String
    /// SHA-256 of the file's exact bytes, as 64 hex digits.
    public let checksum: String

    /// Creates a migration from an embedded file named `NNNN_description.sql`.
    ///
    /// - Precondition: the name has that shape (a programmer error in the `Migrations/` folders otherwise).
    public init(file: EmbeddedMigrationFile) {
        self.init(file: file, checksum: SHA256.hexDigest(of: file.bytes))
    }

    /// Creates a migration from an embedded file whose checksum is already known (computed at build time by the
    /// `EmbedMigrations` plugin, so that opening a database does not hash every migration again).
    package init(file: EmbeddedMigrationFile, checksum: String) {
        let stem = file.fileName.hasSuffix(".sql") ? String(file.fileName.dropLast(4)) : file.fileName
        let parts = stem.split(separator: "_", maxSplits: 1)
        guard parts.count == 2, parts[0].count == 4, let version = Int(parts[0]), version > 0 else {
            preconditionFailure("API Violation: migration file \(file.fileName) is not named NNNN_description.sql")
        }
        self.version = version
        self.name = String(parts[1])
        self.sql = file.sql
        self.checksum = checksum
    }

    /// Creates a migration from its parts (for tests and tools); the checksum is computed from `sql`.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = SHA256.hexDigest(of: Array(sql.utf8))
    }
}
