/// An error from the storage layer: opening, migrating, or a repository operation.
///
/// Backend-neutral: both backends map their failures to these cases at their edge (a UNIQUE failure on
/// `users.id` becomes ``userAlreadyExists(_:)`` on SQLite and on PostgreSQL), so callers never parse a database's
/// messages. Descriptions name the offending value but
/// never echo bound values beyond what names it.
public enum StorageError: Error, Sendable, Hashable {
    /// The file exists but is not a SQLite database (or the server is not a FeedSync database); it was not modified.
    case notADatabase(path: String)
    /// The database cannot be opened or created at this path (missing directory, permissions, a directory).
    case cannotOpen(path: String, reason: String)
    /// A write was attempted on a database that is read-only (file permissions or opened read-only).
    case readOnly(path: String)
    /// A write reached a PostgreSQL server that takes none: a standby in recovery (after a failover, or a URL that
    /// names it), or a server whose sessions are read-only. Nothing was written; the primary may take it.
    case notPrimary(location: String)
    /// The database file is damaged (`SQLITE_CORRUPT`), for example truncated.
    case corrupt(path: String)
    /// The disk (or a file size limit) is full; the transaction was rolled back.
    case diskFull(path: String)
    /// The operating system failed a read or write (`SQLITE_IOERR`, with its extended code): a full disk, a file
    /// size limit, a failing device. The transaction was rolled back.
    case ioError(path: String, code: Int32)
    /// Another connection held a lock for longer than the busy policy waits, or (PostgreSQL) a serialization
    /// failure or deadlock outlasted the retries; retrying later may succeed.
    case busy(DatabaseFailure)
    /// The connection to the database server could not be made or was lost; the transaction, if any, did not
    /// commit (or, lost during `COMMIT`, its outcome is unknown). The next call reconnects.
    case connectionLost(location: String, reason: String)
    /// A statement ran longer than the configured statement timeout and was cancelled; nothing was written.
    case timedOut(DatabaseFailure)
    /// The database was written by a newer FeedSync: its schema version is higher than this binary knows.
    case schemaNewer(databaseVersion: Int, binaryVersion: Int)
    /// The event log holds an event of a kind this binary does not know: the database was most likely written by a
    /// newer FeedSync. Nothing is guessed: the read fails rather than showing the event as another kind.
    case unknownEventKind(kind: String, seq: Int64, schemaVersion: Int)
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
    /// The database file being followed was deleted or replaced by another file (its device and inode changed).
    case databaseReplaced(path: String)
    /// A location that names no backend this build has (an unknown `scheme://`, or PostgreSQL in a build without
    /// the `PostgreSQL` trait).
    case unsupportedLocation(String, reason: String)
    /// Any other database failure, with the backend's code, message and SQL.
    case database(DatabaseFailure)
}

extension StorageError: CustomStringConvertible {
    /// One line naming what went wrong and the value involved.
    public var description: String {
        switch self {
        case .notADatabase(let path): "\(path) is not a FeedSync database (not SQLite); it was left untouched"
        case .cannotOpen(let path, let reason): "cannot open database \(path): \(reason)"
        case .readOnly(let path): "database \(path) is read-only"
        case .notPrimary(let location):
            "the server of \(location) takes no writes: it is a read-only standby (or its sessions are read-only)"
        case .corrupt(let path): "database \(path) is damaged (SQLite reports it malformed)"
        case .diskFull(let path): "the disk is full while writing \(path); nothing was written"
        case .ioError(let path, let code): "I/O error on \(path) (SQLite code \(code)); nothing was written"
        case .busy(let error): "database is busy (locked by another connection beyond the timeout): \(error.message)"
        case .connectionLost(let location, let reason): "no connection to \(location): \(reason)"
        case .timedOut(let error): "statement timed out and was cancelled: \(error.message)"
        case .schemaNewer(let database, let binary):
            "database schema version \(database) is newer than this FeedSync (knows up to \(binary))"
        case .unknownEventKind(let kind, let seq, let schemaVersion):
            "event \(seq) has kind \"\(kind)\", which this FeedSync does not know: the database (schema version "
                + "\(schemaVersion)) was likely written by a newer FeedSync"
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
        case .databaseReplaced(let path): "the database file \(path) was deleted or replaced"
        case .unsupportedLocation(let location, let reason): "unsupported database location \(location): \(reason)"
        case .database(let error): error.description
        }
    }
}
