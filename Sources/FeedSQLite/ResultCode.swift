internal import CSQLite

/// A SQLite result code, primary or extended.
///
/// SQLite reports failures as integers: the low 8 bits are the *primary* code (`SQLITE_BUSY`), the rest refine it
/// into an *extended* code (`SQLITE_BUSY_SNAPSHOT`). FeedSync always enables extended codes and keeps the exact
/// value; the `~=` operator lets a primary code match its whole family in a `switch` or `catch`:
///
/// ```swift
/// do { try db.write { try $0.execute("…") } }
/// catch let error as SQLiteError where ResultCode.busy ~= error.code { retryLater() }
/// ```
///
/// Related SQLite documentation: <https://www.sqlite.org/rescode.html>
public struct ResultCode: RawRepresentable, Hashable, Sendable {
    /// The raw integer code as SQLite returns it.
    public let rawValue: Int32

    /// Wraps a raw SQLite result code.
    public init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// The primary code of this (possibly extended) code: its low 8 bits.
    public var primary: ResultCode { ResultCode(rawValue: rawValue & 0xFF) }

    /// SQLite's own English name for the code, such as `"database is locked"`.
    public var englishDescription: String { String(cString: sqlite3_errstr(rawValue)) }

    /// Matches when `pattern` is a primary code and `code` belongs to its family, or when both are equal.
    public static func ~= (pattern: ResultCode, code: ResultCode) -> Bool {
        pattern == code || (pattern == pattern.primary && pattern == code.primary)
    }

    /// `SQLITE_OK`: success.
    public static let ok = ResultCode(rawValue: SQLITE_OK)
    /// `SQLITE_ERROR`: generic error, such as an SQL syntax error.
    public static let error = ResultCode(rawValue: SQLITE_ERROR)
    /// `SQLITE_BUSY`: another connection holds a conflicting lock.
    public static let busy = ResultCode(rawValue: SQLITE_BUSY)
    /// `SQLITE_LOCKED`: a conflict within the same connection or shared cache.
    public static let locked = ResultCode(rawValue: SQLITE_LOCKED)
    /// `SQLITE_NOMEM`: out of memory.
    public static let noMemory = ResultCode(rawValue: SQLITE_NOMEM)
    /// `SQLITE_READONLY`: an attempt to write to a read-only database.
    public static let readOnly = ResultCode(rawValue: SQLITE_READONLY)
    /// `SQLITE_INTERRUPT`: the operation was interrupted.
    public static let interrupt = ResultCode(rawValue: SQLITE_INTERRUPT)
    /// `SQLITE_IOERR`: an I/O error from the operating system.
    public static let ioError = ResultCode(rawValue: SQLITE_IOERR)
    /// `SQLITE_CORRUPT`: the database file is malformed.
    public static let corrupt = ResultCode(rawValue: SQLITE_CORRUPT)
    /// `SQLITE_FULL`: the disk or the database is full.
    public static let full = ResultCode(rawValue: SQLITE_FULL)
    /// `SQLITE_CANTOPEN`: the file cannot be opened.
    public static let cannotOpen = ResultCode(rawValue: SQLITE_CANTOPEN)
    /// `SQLITE_CONSTRAINT`: a constraint (UNIQUE, CHECK, NOT NULL, FOREIGN KEY, …) failed.
    public static let constraint = ResultCode(rawValue: SQLITE_CONSTRAINT)
    /// `SQLITE_MISMATCH`: a data type mismatch.
    public static let mismatch = ResultCode(rawValue: SQLITE_MISMATCH)
    /// `SQLITE_MISUSE`: the library was used incorrectly.
    public static let misuse = ResultCode(rawValue: SQLITE_MISUSE)
    /// `SQLITE_NOTADB`: the file is not a database.
    public static let notADatabase = ResultCode(rawValue: SQLITE_NOTADB)
    /// `SQLITE_ROW`: a step produced a row.
    public static let row = ResultCode(rawValue: SQLITE_ROW)
    /// A parameter index or name out of range (`SQLITE_RANGE`).
    public static let range = ResultCode(rawValue: SQLITE_RANGE)
    /// `SQLITE_DONE`: a step finished.
    public static let done = ResultCode(rawValue: SQLITE_DONE)

    /// `SQLITE_CONSTRAINT_UNIQUE`: a UNIQUE constraint failed.
    public static let constraintUnique = ResultCode(rawValue: 2067)
    /// `SQLITE_CONSTRAINT_PRIMARYKEY`: a PRIMARY KEY constraint failed.
    public static let constraintPrimaryKey = ResultCode(rawValue: 1555)
    /// `SQLITE_CONSTRAINT_FOREIGNKEY`: a FOREIGN KEY constraint failed.
    public static let constraintForeignKey = ResultCode(rawValue: 787)
    /// `SQLITE_CONSTRAINT_NOTNULL`: a NOT NULL constraint failed.
    public static let constraintNotNull = ResultCode(rawValue: 1299)
    /// `SQLITE_CONSTRAINT_CHECK`: a CHECK constraint failed.
    public static let constraintCheck = ResultCode(rawValue: 275)
    /// `SQLITE_CONSTRAINT_TRIGGER`: a `RAISE(ABORT, …)` in a trigger.
    public static let constraintTrigger = ResultCode(rawValue: 1811)
    /// `SQLITE_BUSY_SNAPSHOT`: a read transaction cannot be upgraded because its snapshot is stale.
    public static let busySnapshot = ResultCode(rawValue: 517)
}

extension ResultCode: CustomStringConvertible {
    /// The numeric code with SQLite's English name, such as `5 (database is locked)`.
    public var description: String { "\(rawValue) (\(englishDescription))" }
}
