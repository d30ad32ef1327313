public import FeedCore
public import FeedSQLite

extension StorageError {
    /// Wraps a SQLite error from opening or using the database at `path`, picking the specific case when one fits.
    public init(_ error: SQLiteError, path: String?) {
        let location = path ?? ":memory:"
        switch error.code {
        case ResultCode.notADatabase: self = .notADatabase(path: location)
        case ResultCode.cannotOpen: self = .cannotOpen(path: location, reason: error.message)
        case ResultCode.readOnly: self = .readOnly(path: location)
        case ResultCode.corrupt: self = .corrupt(path: location)
        case ResultCode.full: self = .diskFull(path: location)
        case ResultCode.ioError: self = .ioError(path: location, code: error.code.rawValue)
        case ResultCode.busy, ResultCode.locked: self = .busy(DatabaseFailure(error))
        default: self = .database(DatabaseFailure(error))
        }
    }

    /// A failure of this backend that SQLite did not report (an unexpected value).
    static func sqliteFailure(_ message: String) -> StorageError {
        .database(DatabaseFailure(backend: "SQLite", code: "\(ResultCode.error.rawValue)", message: message))
    }
}

extension DatabaseFailure {
    /// SQLite's extended result code, message and statement.
    public init(_ error: SQLiteError) {
        self.init(backend: "SQLite", code: "\(error.code.rawValue)", message: error.message, sql: error.sql)
    }
}
