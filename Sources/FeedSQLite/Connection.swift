internal import CSQLite
internal import Foundation

/// One SQLite connection: the handle that runs statements and transactions.
///
/// Most code never creates a connection: it receives one inside ``Database/write(_:)`` or ``Database/read(_:)``.
/// Such a handle is valid only inside its closure; using it after the closure returns is a programmer error that
/// traps with an "API Violation" message. A connection is not `Sendable`.
///
/// Every connection is opened in SQLite's multi-thread mode (the owner serializes access), with extended result
/// codes, `foreign_keys=ON` and the configured busy policy. Writers also use `journal_mode=WAL` and
/// `synchronous=NORMAL`; nothing that writes runs before the schema has been read (see
/// ``Database/init(location:configuration:validate:)`` for a check at that point).
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/sqlite3.html>
public final class Connection {
    /// Where a connection's database lives.
    public enum Location: Sendable, Hashable {
        /// A database file at this path, taken literally: never as a SQLite URI (`file:…`) nor as `:memory:`.
        /// A relative path is relative to the working directory; an empty path cannot be opened.
        case file(String)
        /// A private in-memory database, gone when its connection closes.
        case inMemory
    }

    let handle: OpaquePointer
    /// Where this connection's database lives.
    public let location: Location
    /// Whether this connection was opened read-only.
    public let isReadOnly: Bool
    var statementCache: [StatementKey: Statement] = [:]
    /// How many statements ``cachedStatement(_:)`` holds prepared.
    public var cachedStatementCount: Int { statementCache.count }
    /// The last few cached statements looked up, by where their SQL text's bytes are stored (see
    /// ``cachedStatement(_:)``).
    var recentStatements: [(address: UnsafeRawPointer, count: Int, sql: String, statement: Statement)] = []
    var nextRecent = 0
    /// How many statements `recentStatements` holds: a like command's transaction uses about six.
    static let recentCapacity = 8
    private var busyCallbackBox: BusyCallbackBox?
    private var busyWaiter: BusyWaiter?
    /// The object behind the WAL hook (a `Checkpointer`), kept alive as long as the connection.
    var walHookOwner: AnyObject?
    private var isClosed = false
    /// Set by the owning ``Database`` while a closure may use the connection.
    var isAccessible = true

    // MARK: - Opening and closing

    /// Opens a connection.
    ///
    /// A new database file is created readable and writable by its owner only (mode 0600); a missing parent
    /// directory is an error (`SQLITE_CANTOPEN`).
    ///
    /// - Parameters:
    ///   - location: a file path or ``Location/inMemory``.
    ///   - readOnly: open without write access; the file must exist.
    ///   - configuration: busy policy and cache size.
    /// - Throws: ``SQLiteError`` when the file cannot be opened or configured; the handle is closed again.
    public convenience init(
        location: Location, readOnly: Bool = false, configuration: Configuration = Configuration()
    ) throws(SQLiteError) {
        try self.init(location: location, access: readOnly ? .readOnly : .readWrite, configuration: configuration)
        if !readOnly {
            do {
                try prepareForWriting(configuration: configuration)
            } catch {
                close()
                throw error
            }
        }
    }

    /// How a connection opens its file.
    enum Access {
        /// `SQLITE_OPEN_READONLY`.
        case readOnly
        /// `SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE`; a missing file is created with mode 0600.
        case readWrite
        /// `SQLITE_OPEN_READWRITE` without create: a missing file is `SQLITE_CANTOPEN`.
        case readWriteExisting
        /// `SQLITE_OPEN_READONLY` with the `immutable=1` URI parameter: no locks, no `-wal` or `-shm` file, and any
        /// write-ahead log ignored. Only for a file with none to read (see ``Database``'s read-only opening).
        ///
        /// Related SQLite documentation: <https://www.sqlite.org/uri.html#uriimmutable>
        case immutable
    }

    /// Opens a connection and sets it up without writing anything: busy policy, `foreign_keys`, a read of the
    /// schema (which surfaces `SQLITE_NOTADB`) and the cache size. ``prepareForWriting(configuration:)`` does the
    /// rest for a writer.
    ///
    /// A read-write access refuses with `SQLITE_READONLY`, before `sqlite3_open_v2`, an existing file this process
    /// cannot write (see ``writeRefusal(path:)``).
    init(location: Location, access: Access, configuration: Configuration) throws(SQLiteError) {
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        switch access {
        case .readOnly: flags |= SQLITE_OPEN_READONLY
        case .readWrite: flags |= SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
        case .readWriteExisting: flags |= SQLITE_OPEN_READWRITE
        case .immutable: flags |= SQLITE_OPEN_READONLY | SQLITE_OPEN_URI
        }
        let path: String
        let shownPath: String
        switch location {
        case .file(let filePath):
            path = access == .immutable ? Connection.immutableURI(path: filePath) : Connection.literalFilename(filePath)
            shownPath = filePath
            if access == .readWrite { Connection.createOwnerOnlyFileIfMissing(path) }
            if access == .readWrite || access == .readWriteExisting, let reason = Connection.writeRefusal(path: path) {
                throw SQLiteError(code: .readOnly, message: "cannot write \(shownPath): \(reason)")
            }
        case .inMemory:
            path = ":memory:"
            shownPath = path
        }
        var pointer: OpaquePointer?
        let code = sqlite3_open_v2(path, &pointer, flags, nil)
        guard let pointer else { throw SQLiteError(code: ResultCode(rawValue: code)) }
        if code != SQLITE_OK {
            let error = SQLiteError(
                code: ResultCode(rawValue: sqlite3_extended_errcode(pointer)),
                message: String(cString: sqlite3_errmsg(pointer)) + " (\(shownPath))")
            sqlite3_close_v2(pointer)
            throw error
        }
        self.handle = pointer
        self.location = location
        self.isReadOnly = access == .readOnly || access == .immutable
        sqlite3_extended_result_codes(pointer, 1)
        do {
            try setUp(configuration: configuration)
        } catch {
            close()
            throw error
        }
    }

    deinit {
        if !isClosed {
            recentStatements.removeAll()
            statementCache.removeAll()
            sqlite3_close_v2(handle)
        }
    }

    /// Closes the connection, finalizing its cached statements first. Closing twice does nothing.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/close.html>
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        recentStatements.removeAll()
        statementCache.removeAll()
        // close_v2 defers the close until user-held statements are finalized, so it never fails with BUSY.
        sqlite3_close_v2(handle)
    }

    private func setUp(configuration: Configuration) throws(SQLiteError) {
        switch configuration.busyMode {
        case .immediateError:
            sqlite3_busy_timeout(handle, 0)
        case .timeout(let duration):
            let waiter = BusyWaiter(timeout: duration)
            busyWaiter = waiter
            sqlite3_busy_handler(
                handle,
                { context, retries in
                    guard let context else { return 0 }
                    return Unmanaged<BusyWaiter>.fromOpaque(context).takeUnretainedValue().retry(after: Int(retries)) ? 1 : 0
                },
                Unmanaged.passUnretained(waiter).toOpaque()
            )
        case .callback(let callback):
            let box = BusyCallbackBox(callback)
            busyCallbackBox = box
            sqlite3_busy_handler(
                handle,
                { context, retries in
                    guard let context else { return 0 }
                    let box = Unmanaged<BusyCallbackBox>.fromOpaque(context).takeUnretainedValue()
                    return box.callback(Int(retries)) ? 1 : 0
                },
                Unmanaged.passUnretained(box).toOpaque()
            )
        }
        // Reading the schema here surfaces SQLITE_NOTADB for a file that is not a database, before anything writes.
        try withBusyRetry(timeout: configuration.busyTimeout) { () throws(SQLiteError) in
            try execute("PRAGMA foreign_keys = ON; SELECT count(*) FROM sqlite_schema;")
        }
        if let kib = configuration.cacheSizeKiB {
            // PRAGMA takes no parameters; the value is an integer from the configuration, not text input.
            try execute("PRAGMA cache_size = " + String(-abs(kib)))
        }
        if let mib = configuration.memoryMapSizeMiB, mib > 0 { try mapFile(megabytes: mib) }
    }

    /// Makes a writer of a connection opened by ``init(location:access:configuration:)``: switches a file to WAL
    /// (the first step that may write the file) and sets `synchronous = NORMAL`; with
    /// ``CheckpointPolicy/inline(pages:)``, sets SQLite's automatic checkpoint to those pages.
    func prepareForWriting(configuration: Configuration) throws(SQLiteError) {
        if case .file = location {
            // Switching to WAL needs an exclusive lock for an instant; retry within the busy policy's bound.
            // https://www.sqlite.org/wal.html#activating_and_configuring_wal_mode
            try withBusyRetry(timeout: configuration.busyTimeout) { () throws(SQLiteError) in
                let mode = try makeStatement("PRAGMA journal_mode = WAL")
                guard try mode.step(), mode.row.string(at: 0).lowercased() == "wal" else {
                    throw SQLiteError(code: .error, message: "cannot switch the database to WAL mode")
                }
            }
        }
        try execute("PRAGMA synchronous = NORMAL")
        if case .inline(let pages) = configuration.checkpointPolicy {
            sqlite3_wal_autocheckpoint(handle, Int32(clamping: max(0, pages)))
        }
    }

    /// Retries `body` while it fails with BUSY/LOCKED, sleeping briefly, until `timeout` has elapsed.
    private func withBusyRetry(timeout: Duration, _ body: () throws(SQLiteError) -> Void) throws(SQLiteError) {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        var pause = Duration.milliseconds(1)
        while true {
            do {
                try body()
                return
            } catch  where error.isBusy && clock.now < deadline {
                // Not a wait for an event: SQLite offers no notification when another process releases its lock.
                usleep(UInt32(pause.components.attoseconds / 1_000_000_000_000))
                pause = min(pause * 2, .milliseconds(50))
            }
        }
    }

    // MARK: - State

    /// The rowid of the last successful `INSERT` on this connection.
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// The number of rows changed by the last completed statement.
    public var changes: Int { Int(sqlite3_changes(handle)) }

    /// Whether a transaction is open (the connection is not in autocommit mode).
    public var isInTransaction: Bool { sqlite3_get_autocommit(handle) == 0 }

    /// `PRAGMA data_version`: changes whenever another connection commits to the database file.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/pragma.html#pragma_data_version>
    public func dataVersion() throws -> Int64 {
        try fetchInt64("PRAGMA data_version") ?? 0
    }

    /// How many times this connection dropped its page cache (`SQLITE_FCNTL_DATA_VERSION`): a read transaction
    /// that finds the database changed since this connection's last one drops it, and with it the memory map of the
    /// file. No statement runs.
    var pagerDataVersion: UInt32 {
        var version: UInt32 = 0
        _ = sqlite3_file_control(handle, "main", SQLITE_FCNTL_DATA_VERSION, &version)
        return version
    }

    /// Sets how much of the database file this connection reads through a memory map (`PRAGMA mmap_size`); 0 reads
    /// every page with `pread`.
    func mapFile(megabytes: Int) throws(SQLiteError) {
        // PRAGMA takes no parameters; the value is an integer from the configuration, not text input.
        try execute("PRAGMA mmap_size = " + String(max(0, megabytes) * 1_048_576))
    }

    // MARK: - Internals

    @usableFromInline
    func error(code: Int32, sql: String?) -> SQLiteError {
        let extended = sqlite3_extended_errcode(handle)
        let resultCode = ResultCode(rawValue: (extended & 0xFF) == (code & 0xFF) ? extended : code)
        return SQLiteError(code: resultCode, message: String(cString: sqlite3_errmsg(handle)), sql: sql)
    }

    func checkAccess() {
        precondition(isAccessible, "API Violation: a database connection was used outside the closure it was handed to")
    }
}

@available(*, unavailable, message: "A connection is used by one thread at a time; share a Database instead.")
extension Connection: Sendable {}

/// Keeps a busy callback alive for as long as the connection that calls it.
private final class BusyCallbackBox {
    let callback: @Sendable (Int) -> Bool
    init(_ callback: @escaping @Sendable (Int) -> Bool) { self.callback = callback }
}

/// ``BusyMode/timeout(_:)``'s busy handler: polls the lock about every millisecond until the timeout has passed.
///
/// SQLite's own (`sqlite3_busy_timeout`) sleeps 1, 2, 5, … ms and then 100 ms between attempts, about 50 attempts in
/// 5 s. A writer in another process that commits back to back holds the write lock almost all the time and frees
/// it only for the moment between two of its transactions; an attempt every 100 ms rarely lands in that moment, and
/// a waiting writer can be refused for the whole timeout while the other goes on — the likelier, the faster the
/// other commits. Polling every ~1 ms, with jitter so that waiting
/// processes do not poll in step, gives ~5,000 attempts in 5 s for a cost of one `fcntl` each.
///
/// One connection is used by one thread at a time, so `deadline` needs no lock.
private final class BusyWaiter {
    let timeout: Duration
    private var deadline = ContinuousClock.now
    private var random = SystemRandomNumberGenerator()

    init(timeout: Duration) { self.timeout = timeout }

    /// Whether SQLite should try the lock again; sleeps before saying so. `retries` is 0 at a lock's first refusal.
    func retry(after retries: Int) -> Bool {
        let now = ContinuousClock.now
        if retries == 0 { deadline = now + timeout }
        guard now < deadline else { return false }
        // 50, 100, 200, 400 µs first (a transaction is often that short), then 0.5–1.5 ms.
        let micros = retries < 4 ? 50 << retries : Int.random(in: 500...1_500, using: &random)
        usleep(UInt32(min(micros, Int((deadline - now) / .microseconds(1)) + 1)))
        return true
    }
}
