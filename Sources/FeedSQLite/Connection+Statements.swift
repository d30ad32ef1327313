internal import CSQLite
internal import Foundation

extension Connection {
    // MARK: - Statements

    /// Returns the statement for `sql` from this connection's cache, preparing it on first use.
    ///
    /// Cached statements are prepared with `SQLITE_PREPARE_PERSISTENT` and live as long as the connection. Use
    /// them for SQL that runs many times; use ``makeStatement(_:)`` for one-off SQL.
    ///
    /// ```swift
    /// let insert = try db.cachedStatement("INSERT INTO users(id, name, created_at) VALUES (?, ?, ?)")
    /// try insert.execute("user1", "Ada", now)
    /// ```
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/prepare.html>
    public func cachedStatement(_ sql: String) throws(SQLiteError) -> Statement {
        checkAccess()
        // The statements looked up last are found by the address of their text's bytes, before the cache hashes
        // the text. Each entry holds the caller's text it was found by, so those bytes stay allocated and unchanged
        // while the entry lives: the same address and length mean the same text. FeedSync's statements are string
        // constants, so a repeated one is found here (a like command's six cost ~5,400 instructions through the
        // hash, ~4 % of the command).
        let storage = Self.storage(of: sql)
        if let (address, count) = storage {
            for entry in recentStatements where entry.address == address && entry.count == count { return entry.statement }
        }
        let key = StatementKey(sql)
        let statement: Statement
        if let cached = statementCache[key] {
            statement = cached
        } else {
            statement = try prepare(sql, persistent: true)
            statementCache[key] = statement
        }
        if let (address, count) = storage {
            // The caller's text, kept alive by the entry: a caller that passes the same string again finds it,
            // whichever string the statement was first prepared from.
            let entry = (address: address, count: count, sql: sql, statement: statement)
            if recentStatements.count < Self.recentCapacity {
                recentStatements.append(entry)
            } else {
                recentStatements[nextRecent] = entry
                nextRecent = (nextRecent + 1) % Self.recentCapacity
            }
        }
        return statement
    }

    /// Where `sql`'s UTF-8 bytes are stored, for a native string too long to be stored inline (over 15 bytes).
    private static func storage(of sql: String) -> (UnsafeRawPointer, Int)? {
        guard sql.utf8.count > 15 else { return nil }
        return sql.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.baseAddress.map { (UnsafeRawPointer($0), bytes.count) }
        } ?? nil
    }

    /// Prepares a new statement for `sql`, finalized when the returned object is released.
    public func makeStatement(_ sql: String) throws(SQLiteError) -> Statement {
        checkAccess()
        return try prepare(sql, persistent: false)
    }

    private func prepare(_ sql: String, persistent: Bool) throws(SQLiteError) -> Statement {
        var pointer: OpaquePointer?
        var tail: UnsafePointer<CChar>?
        let flags = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        let code = sql.withCString { text in
            let status = sqlite3_prepare_v3(handle, text, -1, flags, &pointer, &tail)
            if status == SQLITE_OK, let tail, tail.pointee != 0 {
                // Only whitespace and comments may follow the one statement.
                let rest = String(cString: tail).trimmingCharacters(in: .whitespacesAndNewlines)
                if !rest.isEmpty && !rest.hasPrefix("--") {
                    return SQLITE_MISUSE
                }
            }
            return status
        }
        if code == SQLITE_MISUSE, let pointer {
            sqlite3_finalize(pointer)
            throw SQLiteError(code: .misuse, message: "more than one statement; use execute(_:) for scripts", sql: sql)
        }
        guard code == SQLITE_OK else { throw error(code: code, sql: sql) }
        guard let pointer else {
            throw SQLiteError(code: .misuse, message: "no statement in SQL text", sql: sql)
        }
        return Statement(handle: pointer, connection: self, sql: sql)
    }

    /// Runs one or more SQL statements separated by semicolons, with no parameters.
    ///
    /// Use it for scripts such as migrations and pragmas, never with values built from input: values are bound
    /// through ``run(_:_:)`` or a ``Statement``.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/c3ref/exec.html>
    public func execute(_ sql: String) throws(SQLiteError) {
        checkAccess()
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        if code != SQLITE_OK {
            let text = message.map { String(cString: $0) }
            sqlite3_free(message)
            throw SQLiteError(code: ResultCode(rawValue: sqlite3_extended_errcode(handle)), message: text, sql: sql)
        }
    }

    /// Runs one statement from the cache with the values bound, and returns the number of changed rows.
    ///
    /// ```swift
    /// try db.run("DELETE FROM likes WHERE user_key = ? AND post_key = ?", userKey, postKey)
    /// ```
    @discardableResult
    @inlinable
    public func run<each Value: SQLiteBindable>(_ sql: String, _ values: repeat each Value) throws(SQLiteError) -> Int {
        try cachedStatement(sql).execute(repeat each values)
    }

    /// Runs a cached query with the values bound and decodes its first row.
    @inlinable
    public func fetchOne<each Value: SQLiteBindable, T>(
        _ sql: String,
        _ values: repeat each Value,
        decode: (Row) throws -> T
    ) throws -> T? {
        try cachedStatement(sql).fetchOne(repeat each values, decode: decode)
    }

    /// Runs a cached query with the values bound and decodes every row.
    @inlinable
    public func fetchAll<each Value: SQLiteBindable, T>(
        _ sql: String,
        _ values: repeat each Value,
        decode: (Row) throws -> T
    ) throws -> [T] {
        try cachedStatement(sql).fetchAll(repeat each values, decode: decode)
    }

    /// Runs a cached query that returns one integer, such as `SELECT count(*) …`; `nil` when there is no row.
    @inlinable
    public func fetchInt64<each Value: SQLiteBindable>(_ sql: String, _ values: repeat each Value) throws -> Int64? {
        try cachedStatement(sql).fetchOne(repeat each values, decode: { $0.isNull(at: 0) ? nil : $0.int64(at: 0) }) ?? nil
    }

}

/// The statement cache's key: the SQL text compared byte for byte, hashed from its length and at most 24 of its bytes.
///
/// Hashing the whole text with `String`'s `Hashable` (SipHash over every byte, ~600 instructions for a 100-byte
/// statement, ~1,500 for the feed page query) would be the largest cost of a cache hit; statements differ early
/// (`SELECT`/`INSERT`, the table) or late (the `WHERE` clause) and rarely have the same length, so the first 16 and
/// last 8 bytes with the length spread them as well. Equal keys are byte-equal, so equal hashes hold. A literal
/// looked up again has the same storage, which `==` checks first.
struct StatementKey: Hashable {
    let sql: String

    init(_ sql: String) { self.sql = sql }

    func hash(into hasher: inout Hasher) {
        let hashed: Void? = sql.utf8.withContiguousStorageIfAvailable { bytes in
            hasher.combine(bytes.count)
            if bytes.count < 24 {
                hasher.combine(bytes: UnsafeRawBufferPointer(bytes))
            } else {
                let raw = UnsafeRawBufferPointer(bytes)
                hasher.combine(raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
                hasher.combine(raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                hasher.combine(raw.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self))
            }
        }
        if hashed == nil {
            // Not contiguous UTF-8 (a bridged string): hash the same bytes from a copy.
            let bytes = Array(sql.utf8)
            hasher.combine(bytes.count)
            if bytes.count < 24 {
                bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
            } else {
                bytes.withUnsafeBytes { raw in
                    hasher.combine(raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self))
                    hasher.combine(raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                    hasher.combine(raw.loadUnaligned(fromByteOffset: bytes.count - 8, as: UInt64.self))
                }
            }
        }
    }

    static func == (lhs: StatementKey, rhs: StatementKey) -> Bool {
        // Byte equality, not String's canonical equivalence: two spellings of the same text are different SQL to
        // SQLite, and the hash above is over bytes.
        let equal: Bool?? = lhs.sql.utf8.withContiguousStorageIfAvailable { left in
            rhs.sql.utf8.withContiguousStorageIfAvailable { right in
                guard left.count == right.count else { return false }
                guard let a = left.baseAddress, let b = right.baseAddress, a != b else { return true }
                return memcmp(a, b, left.count) == 0
            }
        }
        if let equal = equal ?? nil { return equal }
        return lhs.sql.utf8.elementsEqual(rhs.sql.utf8)
    }
}
