/// An error reported by SQLite, with the context needed to act on it.
///
/// It carries the extended ``ResultCode``, SQLite's message and the SQL that failed. Bound values are never part of
/// it, so logging an error cannot leak user data:
///
/// ```
/// SQLite error 2067 (UNIQUE constraint failed: users.id) - while executing `INSERT INTO users …`
/// ```
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/errcode.html>
public struct SQLiteError: Error, Sendable, Hashable {
    /// The extended result code. Match a family with `ResultCode.busy ~= error.code`.
    public let code: ResultCode
    /// SQLite's message for this failure (`sqlite3_errmsg`), or the code's English name.
    public let message: String
    /// The SQL text that failed, if the failure came from a statement.
    public let sql: String?

    /// Creates an error from its parts.
    public init(code: ResultCode, message: String? = nil, sql: String? = nil) {
        self.code = code
        self.message = message ?? code.englishDescription
        self.sql = sql
    }

    /// The primary result code (the family).
    public var primaryCode: ResultCode { code.primary }

    /// Whether another connection's lock caused the failure (`SQLITE_BUSY` or `SQLITE_LOCKED` families).
    public var isBusy: Bool { ResultCode.busy ~= code || ResultCode.locked ~= code }
}

extension SQLiteError: CustomStringConvertible {
    /// `SQLite error CODE (MESSAGE) - while executing `SQL``; never includes bound values.
    public var description: String {
        var text = "SQLite error \(code.rawValue) (\(message))"
        if let sql {
            // One line, whatever the SQL's layout: errors are printed as single lines.
            let compact = sql.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }).joined(separator: " ")
            text += " - while executing `\(compact)`"
        }
        return text
    }
}
