package import FeedCore

/// A connection of its own beside FeedSync's pool, for looking at the server from outside a run: what feedsync-bench
/// samples before and after its timed part (`pg_stat_activity`, `pg_stat_wal`, the WAL position) and where it times
/// lone commits.
///
/// Opened with `application_name=feedsync-probe`, read-write, no statement timeout; every statement commits on its
/// own. One thread at a time.
package final class PostgresProbe {
    private let connection: PostgresConnection
    private let location: String

    /// Connects to `url` (with its password: never printed, errors name ``PostgresBackend/redacted(_:)``'s form).
    ///
    /// - Throws: ``StorageError`` (`cannotOpen` for a string that is not a PostgreSQL URL, `connectionLost`, …).
    package init(url: String) throws(StorageError) {
        location = PostgresBackend.redacted(url)
        guard PostgresURL.isAccepted(url) else {
            throw .cannotOpen(path: location, reason: "not a PostgreSQL URL; use postgresql://user@host:port/database")
        }
        connection = try PostgresBackend.connect(
            url: url, location: location, options: PostgresOptions(), statementTimeout: nil, readOnly: false,
            applicationName: "feedsync-probe")
    }

    deinit { connection.close() }

    /// Runs one statement, prepared once on this connection when `prepared`, and returns its rows.
    @discardableResult
    package func execute(
        _ sql: String, _ arguments: [DatabaseValue] = [], prepared: Bool = false
    ) throws(StorageError)
        -> [[DatabaseValue]]
    {
        do {
            return try connection.execute(sql, arguments, prepared: prepared).rows()
        } catch {
            throw error.storageError(location: location)
        }
    }
}
