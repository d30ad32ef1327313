/// A database failure that no specific ``StorageError`` case names: the backend, its code, its message and the
/// statement.
///
/// Bound values are never part of it: the SQL is the statement text with its placeholders.
public struct DatabaseFailure: Error, Sendable, Hashable {
    /// Which backend failed: `SQLite` or `PostgreSQL`.
    public let backend: String
    /// The backend's code: SQLite's extended result code in decimal, or PostgreSQL's five-character SQLSTATE.
    public let code: String
    /// The backend's message.
    public let message: String
    /// The statement that failed, when one did.
    public let sql: String?

    /// A failure from its parts.
    public init(backend: String, code: String, message: String, sql: String? = nil) {
        self.backend = backend
        self.code = code
        self.message = message
        self.sql = sql
    }
}

extension DatabaseFailure: CustomStringConvertible {
    /// `SQLite error 19: message - while executing SQL`, one line.
    public var description: String {
        var text = "\(backend) error \(code): \(message)"
        if let sql { text += " - while executing \(sql.split(whereSeparator: \.isNewline).joined(separator: " "))" }
        return text
    }
}
