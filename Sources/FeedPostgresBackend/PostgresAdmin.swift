public import FeedCore

/// Administration outside a FeedSync database: running a statement on a one-off connection, creating and dropping
/// databases (for tests and tools).
///
/// Connections are opened with `application_name=feedsync-admin`, no statement timeout, and closed after the call.
public enum PostgresAdmin {
    /// Runs one statement on a new connection to `url`, outside any transaction, and returns its rows.
    ///
    /// - Parameters:
    ///   - sql: one statement; placeholders `$1`, `$2`, …, every value bound.
    ///   - arguments: the values.
    /// - Throws: ``StorageError`` (`cannotOpen` for a string that is not a PostgreSQL URL, `connectionLost`, …).
    @discardableResult
    public static func execute(url: String, _ sql: String, _ arguments: [DatabaseValue] = []) throws(StorageError) -> [[DatabaseValue]] {
        let location = PostgresBackend.redacted(url)
        guard PostgresURL.isAccepted(url) else {
            throw .cannotOpen(path: location, reason: "not a PostgreSQL URL; use postgresql://user@host:port/database")
        }
        let connection = try PostgresBackend.connect(
            url: url, location: location, options: PostgresOptions(), statementTimeout: nil, readOnly: false,
            applicationName: "feedsync-admin")
        defer { connection.close() }
        do {
            return try connection.execute(sql, arguments).rows()
        } catch {
            throw error.storageError(location: location)
        }
    }

    /// Whether `name` may be used by ``createDatabase(url:name:)``: 1 to 63 characters of `a–z 0–9 _`, not starting
    /// with a digit. (A database name is an identifier, which cannot be bound; only such names are ever put in SQL.)
    public static func isValidDatabaseName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...63).contains(bytes.count), !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[0]) else { return false }
        return bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_")
        }
    }

    /// Creates database `name` on the server of `url` (the URL's role needs `CREATEDB`).
    ///
    /// - Throws: ``StorageError/constraintViolation(field:reason:)`` for a name ``isValidDatabaseName(_:)`` refuses;
    ///   ``StorageError`` from the server.
    public static func createDatabase(url: String, name: String) throws(StorageError) {
        try checkName(name)
        try execute(url: url, "CREATE DATABASE " + name)
    }

    /// Drops database `name` if it exists, ending its sessions first (`WITH (FORCE)`).
    public static func dropDatabase(url: String, name: String) throws(StorageError) {
        try checkName(name)
        try execute(url: url, "DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
    }

    /// `url` pointing at database `name` instead (its path replaced; host, user, password and parameters kept).
    public static func url(_ url: String, database name: String) -> String {
        PostgresURL.replacingDatabase(url, with: name)
    }

    private static func checkName(_ name: String) throws(StorageError) {
        guard isValidDatabaseName(name) else {
            throw .constraintViolation(
                field: "database name", reason: "use 1 to 63 characters of a-z, 0-9 and _, not starting with a digit")
        }
    }
}
