internal import Foundation

/// A SQLite database shared by threads and tasks: one writer connection and a pool of reader connections.
///
/// `Database` is the `Sendable` façade over non-`Sendable` ``Connection`` handles. Writes are serialized on the
/// writer and each runs in an IMMEDIATE transaction; reads run on reader connections in parallel with the writer
/// and with each other, each in a deferred transaction, so they see one consistent snapshot. In WAL mode a reader
/// never waits for the writer and the writer never waits for readers.
///
/// ```swift
/// let database = try Database(path: "/tmp/feed.sqlite")
/// try database.write { db in
///     try db.run("INSERT INTO notes(text) VALUES (?)", "hello")
/// }
/// let count = try database.read { db in try db.fetchInt64("SELECT count(*) FROM notes") }
/// ```
///
/// An in-memory database has a single connection: reads are served by the writer, serialized with writes.
///
/// > Important: The connection handed to a closure is valid only inside it. Keeping it and using it later traps.
///
/// Related SQLite documentation: <https://www.sqlite.org/wal.html>
public final class Database: Sendable {
    /// Where the database lives.
    public let location: Connection.Location
    /// The options every connection was opened with.
    public let configuration: Configuration
    private let writer: SerializedConnection?
    /// For a read-only file with ``Configuration/removesWALFilesOnClose``: a read-write connection that runs no
    /// statement after validation and closes last.
    private let keeper: SerializedConnection?
    private let readers: ReaderPool
    /// For a writable file with ``CheckpointPolicy/background(pages:limit:)``: the checkpoint thread's owner.
    private let checkpointer: Checkpointer?

    // MARK: - Opening

    /// Opens (creating if needed) the database file at `path`: a writer now, readers on demand.
    ///
    /// - Throws: ``SQLiteError``: `SQLITE_CANTOPEN` for a missing directory or unreadable file, `SQLITE_NOTADB`
    ///   for a file that is not a database (left unmodified), `SQLITE_BUSY` when the busy policy gave up.
    public convenience init(path: String, configuration: Configuration = Configuration()) throws(SQLiteError) {
        try self.init(location: .file(path), configuration: configuration)
    }

    /// Opens a private in-memory database with one connection.
    public static func inMemory(configuration: Configuration = Configuration()) throws(SQLiteError) -> Database {
        try Database(location: .inMemory, configuration: configuration)
    }

    /// Opens the database at `location`.
    public convenience init(location: Connection.Location, configuration: Configuration = Configuration()) throws(SQLiteError) {
        do {
            try self.init(location: location, configuration: configuration, validate: { _ in })
        } catch let error as SQLiteError {
            throw error
        } catch {
            // Unreachable: the empty validation throws nothing else.
            throw SQLiteError(code: .error, message: "\(error)")
        }
    }

    /// Opens the database at `location`, letting `validate` inspect it before anything can write to the file.
    ///
    /// `validate` runs once, on the first connection, after the steps that only read: the busy policy,
    /// `foreign_keys`, a read of the schema (a file that is not a database fails before it) and the cache size. Only
    /// when it returns does the writer switch the file to WAL (`journal_mode=WAL` writes the header of a
    /// rollback-journal database) and set `synchronous`. When it throws, every connection is closed and the error
    /// is rethrown, so a database the caller refuses is left byte-for-byte as it was — its journal mode too.
    ///
    /// ```swift
    /// let database = try Database(location: .file(path)) { db in
    ///     guard try db.fetchInt64("PRAGMA user_version") ?? 0 <= 3 else { throw TooNew() }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - location: a file path or ``Connection/Location/inMemory``.
    ///   - configuration: busy policy, read-only mode and connection options.
    ///   - validate: reads the database; throws to refuse it. The connection is valid only inside the closure.
    /// - Throws: ``SQLiteError`` from opening, or what `validate` throws.
    public init(
        location: Connection.Location, configuration: Configuration = Configuration(),
        validate: (Connection) throws -> Void
    ) throws {
        self.location = location
        self.configuration = configuration
        let readerCount: Int
        switch location {
        case .inMemory:
            guard !configuration.readOnly else {
                throw SQLiteError(code: .misuse, message: "a read-only database must be a file")
            }
            readerCount = 0
        case .file:
            readerCount = max(1, configuration.maximumReaderCount)
        }
        if configuration.readOnly {
            writer = nil
            checkpointer = nil
            let opened = try Self.openReadOnly(
                location: location, configuration: configuration, capacity: readerCount, validate: validate)
            keeper = opened.keeper
            readers = opened.readers
        } else {
            readers = ReaderPool(location: location, configuration: configuration, capacity: readerCount)
            keeper = nil
            var checkpointer: Checkpointer?
            if case .file = location, case .background(let pages, let limit) = configuration.checkpointPolicy {
                guard pages > 0, limit >= pages else {
                    throw SQLiteError(
                        code: .misuse,
                        message: "checkpointPolicy .background(pages: \(pages), limit: \(limit)): pages must be "
                            + "positive and limit at least pages")
                }
                checkpointer = Checkpointer(location: location, configuration: configuration, pages: pages, limit: limit)
            }
            let connection = try Connection(location: location, access: .readWrite, configuration: configuration)
            do {
                try validate(connection)
                try connection.prepareForWriting(configuration: configuration)
            } catch {
                readers.close()
                connection.close()
                throw error
            }
            checkpointer?.install(on: connection)
            self.checkpointer = checkpointer
            writer = SerializedConnection(connection)
        }
    }

    /// Opens and validates the connections of a read-only database: the readers, and the keeper with
    /// ``Configuration/removesWALFilesOnClose``. With ``Configuration/immutableWhenUnwritable``, a file with no log to
    /// read is opened immutable instead — at once when this process cannot write it or its directory, or after the
    /// usual opening failed to create or grow the `-wal` or `-shm` file (`SQLITE_CANTOPEN`, `SQLITE_READONLY`,
    /// `SQLITE_FULL` or `SQLITE_IOERR`, such as `SQLITE_IOERR_SHMSIZE` on a full disk).
    private static func openReadOnly(
        location: Connection.Location, configuration: Configuration, capacity: Int, validate: (Connection) throws -> Void
    ) throws -> (keeper: SerializedConnection?, readers: ReaderPool) {
        let immutablePath: String? =
            if case .file(let path) = location, configuration.immutableWhenUnwritable { path } else { nil }
        let opensImmutable =
            immutablePath.map { path in Connection.hasNoLogToRead(path: path) && Connection.writeRefusal(path: path) != nil }
            ?? false
        if !opensImmutable {
            let readers = ReaderPool(location: location, configuration: configuration, capacity: capacity)
            // The keeper never writes; it only lets `close()` tidy up as the last connection. It is optional: a
            // file it cannot open read-write is still read. It reads nothing after validation, so it maps nothing: a
            // map would cost its page faults and its unmapping for a few pages read once.
            var keeperConfiguration = configuration
            keeperConfiguration.memoryMapSizeMiB = nil
            let keeper =
                configuration.removesWALFilesOnClose
                ? (try? Connection(location: location, access: .readWriteExisting, configuration: keeperConfiguration))
                    .map(SerializedConnection.init) : nil
            do {
                // Validating on a reader also opens one now, so that a bad path fails here, not on the first read.
                if let keeper {
                    try keeper.withConnection(validate)
                } else {
                    try readers.withReader(validate)
                }
                return (keeper, readers)
            } catch {
                readers.close()
                keeper?.close()
                guard let immutablePath, let failure = error as? SQLiteError,
                    [ResultCode.cannotOpen, .readOnly, .full, .ioError].contains(where: { $0 ~= failure.code }),
                    Connection.hasNoLogToRead(path: immutablePath)
                else { throw error }
            }
        }
        let readers = ReaderPool(location: location, configuration: configuration, capacity: capacity, access: .immutable)
        do {
            try readers.withReader(validate)
        } catch {
            readers.close()
            throw error
        }
        return (nil, readers)
    }

    deinit {
        // Never waits. The readers close first (read-only, they could not remove the log); the checkpoint thread, which
        // holds no reference to the database, is asked to end and to close the writer after its own connection.
        readers.close()
        if let checkpointer { checkpointer.requestStop(closingAfter: writer) } else { writer?.close() }
    }

    /// The file path, or `nil` for an in-memory database.
    public var path: String? {
        if case .file(let path) = location { path } else { nil }
    }

    // MARK: - Access

    /// Runs `body` in an IMMEDIATE transaction on the writer connection: committed when `body` returns, rolled
    /// back when it throws. Writes from all threads are serialized.
    ///
    /// - Throws: what `body` throws, ``SQLiteError`` from the transaction, or `SQLITE_READONLY` for a database
    ///   opened read-only.
    public func write<T>(_ body: (Connection) throws -> T) throws -> T {
        try writeWithoutTransaction { db in try db.transaction(.immediate, body) }
    }

    /// Whether the calling thread is inside ``write(_:)`` or ``writeWithoutTransaction(_:)`` right now: another write
    /// from this thread would wait for itself, so callers that may be reached from inside a write check this first.
    public var isWritingOnCurrentThread: Bool {
        writer?.isHeldByCurrentThread ?? false
    }

    /// Runs `body` on the writer connection with no transaction around it, for pragmas, `VACUUM`, migrations
    /// that manage their own transactions, or explicit ``Connection/transaction(_:_:)`` calls.
    public func writeWithoutTransaction<T>(_ body: (Connection) throws -> T) throws -> T {
        guard let writer else {
            throw SQLiteError(code: .readOnly, message: "the database was opened read-only")
        }
        return try writer.withConnection(body)
    }

    /// Runs `body` in a deferred (read) transaction on a reader connection, so every query in it sees the same
    /// snapshot. Reads run concurrently with each other and with the writer.
    ///
    /// Reader connections are opened read-only (`SQLITE_OPEN_READONLY`): a write inside `body` fails with
    /// `SQLITE_READONLY`.
    public func read<T>(_ body: (Connection) throws -> T) throws -> T {
        try unsafeRead { db in try db.transaction(.deferred, body) }
    }

    /// Runs `body` on a reader connection without a transaction: each statement sees the latest commit (SQLite's
    /// autocommit mode). Cheaper than ``read(_:)`` for a single query; two queries may see different snapshots.
    public func unsafeRead<T>(_ body: (Connection) throws -> T) throws -> T {
        if readers.capacity == 0, let writer {
            return try writer.withConnection(body)
        }
        return try readers.withReader(body)
    }

    /// How many checkpoints ran so far, with ``CheckpointPolicy/background(pages:limit:)`` (all zero otherwise).
    public var checkpoints: CheckpointStatistics {
        checkpointer?.statistics ?? CheckpointStatistics()
    }

    /// Closes every connection. Later calls to ``write(_:)`` or ``read(_:)`` fail with `SQLITE_MISUSE`.
    ///
    /// The checkpoint thread ends first (after the checkpoint it may be running) and readers close next, so the
    /// writer is the last connection: SQLite then checkpoints the WAL into the database and removes the `-wal` and
    /// `-shm` files (a read-only connection could not; a read-only database does it only with
    /// ``Configuration/removesWALFilesOnClose``).
    public func close() {
        checkpointer?.stop()
        readers.close()
        writer?.close()
        keeper?.close()
    }
}
