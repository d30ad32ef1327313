internal import CLibPQ
internal import FeedCore
internal import Foundation

/// A failure reported by libpq or the server, before it is mapped to a ``StorageError``.
///
/// The message is already scrubbed: it holds neither the password nor a bound value (see
/// ``PostgresConnection/scrub(_:sqlState:parameters:secrets:)``).
struct PostgresFailure: Error {
    /// The server's five-character SQLSTATE; `nil` when the failure came from the connection itself (no server
    /// answer).
    let sqlState: String?
    /// The primary message.
    let message: String
    /// The constraint concerned (`PG_DIAG_CONSTRAINT_NAME`), if any.
    let constraint: String?
    /// The table concerned (`PG_DIAG_TABLE_NAME`), if any.
    let table: String?
    /// The statement text (with its placeholders), if a statement failed.
    let sql: String?
    /// Whether the connection can no longer be used.
    let connectionBroken: Bool
    /// Whether the failure was found before anything was sent (so an open transaction is not aborted by it).
    let beforeSending: Bool
    /// Whether the client gave up waiting for the server's answer (the connection's response timeout passed) and
    /// closed the connection: the peer may be gone without a trace (a partition, a dead host), so an immediate
    /// retry would likely wait as long again.
    let noAnswer: Bool

    init(
        sqlState: String?, message: String, constraint: String? = nil, table: String? = nil, sql: String? = nil,
        connectionBroken: Bool, beforeSending: Bool = false, noAnswer: Bool = false
    ) {
        self.sqlState = sqlState
        self.message = message
        self.constraint = constraint
        self.table = table
        self.sql = sql
        self.connectionBroken = connectionBroken
        self.beforeSending = beforeSending
        self.noAnswer = noAnswer
    }

    /// The failure as a backend-neutral database failure.
    var databaseFailure: DatabaseFailure {
        DatabaseFailure(backend: PostgresBackend.name, code: sqlState ?? "08006", message: message, sql: sql)
    }

    /// Whether retrying the whole transaction may cure it: a serialization failure or a deadlock.
    var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }
}
