public import FeedSQLite

/// An error from the storage layer: opening, migrating, or a repository operation.
///
/// Constraint violations are mapped at the repository edge (a UNIQUE failure on `users.id` becomes
/// ``userAlreadyExists(_:)``), so callers never parse SQLite messages. Descriptions name the offending value but
/// never echo bound values beyond what names it.
public enum StorageError: Error, Sendable, Hashable {
    /// The file exists but is not a SQLite database; it was not modified.
    case notADatabase(path: String)
    /// The database cannot be opened or created at this path (missing directory, permissions, a directory).
    case cannotOpen(path: String, reason: String)
    /// A write was attempted on a database that is read-only (file permissions or opened read-only).
    case readOnly(path: String)
    /// The database file is damaged (`SQLITE_CORRUPT`), for example truncated.
    case corrupt(path: String)
    /// The disk (or a file size limit) is full; the transaction was rolled back.
    case diskFull(path: String)
    /// The operating system failed a read or write (`SQLITE_IOERR`): a full disk, a file size limit, a failing
    /// device. The transaction was rolled back.
    case ioError(path: String, code: ResultCode)
    /// Another connection held a lock for longer than the busy policy waits.
    case busy(SQLiteError)
    /// The database was written by a newer FeedSync: its schema version is higher than this binary knows.
    case schemaNewer(databaseVersion: Int, binaryVersion: Int)
    /// The database records a migration this binary does not have.
    case unknownMigration(version: Int, name: String, binaryVersion: Int)
    /// A migration file changed after it was applied: the recorded checksum differs from the embedded file's.
    case migrationChanged(version: Int, name: String, recordedChecksum: String, fileChecksum: String)
    /// The database needs migrations but was opened read-only.
    case migrationsPending(databaseVersion: Int, binaryVersion: Int)
    /// No user has this id.
    case userNotFound(String)
    /// No post has this id.
    case postNotFound(String)
    /// A user with this id exists already.
    case userAlreadyExists(String)
    /// A post with this id exists already.
    case postAlreadyExists(String)
    /// A value broke a schema constraint (length, characters, range).
    case constraintViolation(field: String, reason: String)
    /// Any other SQLite failure, with its code, message and SQL.
    case sqlite(SQLiteError)

    /// Wraps a SQLite error from opening or using the database at `path`, picking the specific case when one fits.
    public init(_ error: SQLiteError, path: String?) {
        let location = path ?? ":memory:"
        switch error.code {
        case ResultCode.notADatabase: self = .notADatabase(path: location)
        case ResultCode.cannotOpen: self = .cannotOpen(path: location, reason: error.message)
        case ResultCode.readOnly: self = .readOnly(path: location)
        case ResultCode.corrupt: self = .corrupt(path: location)
        case ResultCode.full: self = .diskFull(path: location)
        case ResultCode.ioError: self = .ioError(path: location, code: error.code)
        case ResultCode.busy, ResultCode.locked: self = .busy(error)
        default: self = .sqlite(error)
        }
    }
}

extension StorageError: CustomStringConvertible {
    /// One line naming what went wrong and the value involved.
    public var description: String {
        switch self {
        case .notADatabase(let path): "\(path) is not a FeedSync database (not SQLite); it was left untouched"
        case .cannotOpen(let path, let reason): "cannot open database \(path): \(reason)"
        case .readOnly(let path): "database \(path) is read-only"
        case .corrupt(let path): "database \(path) is damaged (SQLite reports it malformed)"
        case .diskFull(let path): "the disk is full while writing \(path); nothing was written"
        case .ioError(let path, let code): "I/O error on \(path) (SQLite code \(code.rawValue)); nothing was written"
        case .busy(let error): "database is busy (locked by another connection beyond the timeout): \(error.message)"
        case .schemaNewer(let database, let binary):
            "database schema version \(database) is newer than this FeedSync (knows up to \(binary))"
        case .unknownMigration(let version, let name, let binary):
            "database has migration \(version) (\(name)) that this FeedSync does not know (knows up to \(binary))"
        case .migrationChanged(let version, let name, let recorded, let file):
            "migration \(version) (\(name)) changed after it was applied: recorded checksum \(recorded.prefix(12)), file checksum \(file.prefix(12))"
        case .migrationsPending(let database, let binary):
            "database schema version \(database) needs migrating to \(binary) but was opened read-only"
        case .userNotFound(let id): "no user \"\(id)\""
        case .postNotFound(let id): "no post \"\(id)\""
        case .userAlreadyExists(let id): "user \"\(id)\" exists already"
        case .postAlreadyExists(let id): "post \"\(id)\" exists already"
        case .constraintViolation(let field, let reason): "invalid \(field): \(reason)"
        case .sqlite(let error): error.description
        }
    }
}
