/// One migration file of `Migrations/sqlite/` or `Migrations/postgresql/`, embedded in the binary at build time by
/// the `EmbedMigrations` plugin: ``all`` lists SQLite's, ``postgresql`` PostgreSQL's.
///
/// The file name is `NNNN_description.sql`: the zero-padded number is the schema version, the rest its name.
/// The bytes are exactly those of the file, so a checksum of ``bytes`` is a checksum of the file.
public struct EmbeddedMigrationFile: Sendable, Hashable {
    /// The file's name within its folder, such as `0001_create_schema.sql`.
    public let fileName: String
    /// The file's exact bytes (UTF-8 SQL text).
    public let bytes: [UInt8]

    /// The file's SQL text, decoded as UTF-8.
    public var sql: String { String(decoding: bytes, as: UTF8.self) }
}
