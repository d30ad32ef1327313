internal import CSQLite
internal import Foundation

/// A prepared SQL statement, owned by one ``Connection``.
///
/// Statements come from ``Connection/cachedStatement(_:)`` (prepared once per connection and reused) or
/// ``Connection/makeStatement(_:)``. Every run resets the statement first; the convenience runners
/// (``execute(_:)``, ``forEachRow(_:body:)``, ``fetchOne(_:decode:)``) also clear the bindings when they finish, so no
/// value outlives its call.
///
/// A statement is not `Sendable`: it belongs to its connection's thread of use.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/stmt.html>
public final class Statement {
    @usableFromInline let handle: OpaquePointer
    @usableFromInline unowned let connection: Connection
    /// The SQL text the statement was prepared from.
    public let sql: String
    /// The number of `?` parameters the statement takes.
    public let parameterCount: Int32

    init(handle: OpaquePointer, connection: Connection, sql: String) {
        self.handle = handle
        self.connection = connection
        self.sql = sql
        self.parameterCount = sqlite3_bind_parameter_count(handle)
    }

    deinit {
        sqlite3_finalize(handle)
    }

    // MARK: - Binding

    // The generic entry points below are `@inlinable` so that the caller's module specializes them for its concrete
    // value types: a call such as `execute(userKey, postKey, now)` then binds with direct `sqlite3_bind_int64` calls
    // instead of going through generic metadata and value witnesses for every value (measured: ~1,400 instructions
    // per statement for binding alone, unspecialized). Only the uncommon paths stay behind non-inlinable functions.

    /// Binds `value` to the parameter at `index` (1-based, as in SQLite).
    ///
    /// - Precondition: `index` is within `1...parameterCount`.
    @inlinable
    public func bind(_ value: some SQLiteBindable, at index: Int32) throws(SQLiteError) {
        if index < 1 || index > parameterCount { bindingIndexOutOfRange(index) }
        let code: Int32
        switch value.sqliteValue {
        case .integer(let int):
            code = bindInt64(int, at: index)
        case .text(let string):
            code = bindText(string, at: index)
        case let other:
            code = bindOther(other, at: index)
        }
        if code != 0 /* SQLITE_OK */ { throw connection.error(code: code, sql: sql) }
    }

    @usableFromInline
    func bindInt64(_ value: Int64, at index: Int32) -> Int32 {
        sqlite3_bind_int64(handle, index, value)
    }

    /// Binds a real, a blob or `NULL` (integers and text have their own paths).
    @usableFromInline
    func bindOther(_ value: SQLiteValue, at index: Int32) -> Int32 {
        switch value {
        case .integer(let int):
            return sqlite3_bind_int64(handle, index, int)
        case .real(let double):
            return sqlite3_bind_double(handle, index, double)
        case .text(let string):
            return bindText(string, at: index)
        case .blob(let data):
            return data.withUnsafeBytes { buffer in
                // A zero-length blob must not bind NULL: zeroblob(0) keeps it an empty BLOB.
                guard let base = buffer.baseAddress, buffer.count > 0 else {
                    return sqlite3_bind_zeroblob(handle, index, 0)
                }
                return sqlite3_bind_blob64(handle, index, base, sqlite3_uint64(buffer.count), feedsync_sqlite_transient())
            }
        case .null:
            return sqlite3_bind_null(handle, index)
        }
    }

    /// Binds text with its byte count from the string's own UTF-8 storage: no temporary C string (String's implicit
    /// `char *` conversion builds a `ContiguousArray` per call) and no `strlen` in SQLite. SQLite copies the bytes
    /// (`SQLITE_TRANSIENT`), as the bindings outlive this call.
    @usableFromInline
    func bindText(_ string: String, at index: Int32) -> Int32 {
        let code = string.utf8.withContiguousStorageIfAvailable { bytes -> Int32 in
            // A non-nil pointer even for "": a NULL pointer would bind NULL instead of the empty string.
            let base = UnsafeRawPointer(bytes.baseAddress) ?? UnsafeRawPointer(Statement.emptyText.utf8Start)
            return sqlite3_bind_text(
                handle, index, base.assumingMemoryBound(to: CChar.self), Int32(bytes.count), feedsync_sqlite_transient())
        }
        if let code { return code }
        return sqlite3_bind_text(handle, index, string, -1, feedsync_sqlite_transient())
    }

    private static let emptyText: StaticString = ""

    @usableFromInline
    func bindingIndexOutOfRange(_ index: Int32) -> Never {
        preconditionFailure("API Violation: binding index \(index) out of range 1...\(parameterCount) for `\(sql)`")
    }

    @usableFromInline
    func bindingCountMismatch(_ count: Int32) -> Never {
        preconditionFailure("API Violation: \(count) values for \(parameterCount) parameters in `\(sql)`")
    }

    /// Binds the values to parameters `1...n` in order.
    ///
    /// - Precondition: the number of values equals ``parameterCount``.
    @inlinable
    public func bind<each Value: SQLiteBindable>(_ values: repeat each Value) throws(SQLiteError) {
        var index: Int32 = 0
        for value in repeat each values {
            index += 1
            try bind(value, at: index)
        }
        if index != parameterCount { bindingCountMismatch(index) }
    }

    /// Binds an array of values to parameters `1...n` in order.
    public func bind(values: [any SQLiteBindable]) throws(SQLiteError) {
        precondition(
            values.count == Int(parameterCount), "API Violation: \(values.count) values for \(parameterCount) parameters in `\(sql)`")
        for (offset, value) in values.enumerated() {
            try bind(value, at: Int32(offset + 1))
        }
    }

    /// Binds `values[n - 1]` to the parameter named `$n` (or `?n`, or the n-th `?`), whatever order the statement
    /// names them in — the placeholder style both FeedSync backends accept.
    ///
    /// - Throws: ``SQLiteError`` with code `SQLITE_RANGE` when the statement names a parameter that is not `$1`
    ///   … `$\(values.count)`, or when the counts differ (user SQL: an error, not a trap).
    public func bind(numbered values: [any SQLiteBindable]) throws(SQLiteError) {
        guard values.count == Int(parameterCount) else {
            throw SQLiteError(
                code: .range, message: "\(values.count) values for \(parameterCount) parameters", sql: sql)
        }
        for index in 1...max(1, parameterCount) where index <= parameterCount {
            var position = Int(index)
            if let name = sqlite3_bind_parameter_name(handle, index) {
                let text = String(cString: name)
                guard let number = Int(text.dropFirst()), text.first == "$" || text.first == "?",
                    (1...values.count).contains(number)
                else {
                    throw SQLiteError(code: .range, message: "parameter \(text) is not one of $1…$\(values.count)", sql: sql)
                }
                position = number
            }
            let value = values[position - 1]
            try bind(value, at: index)
        }
    }

    /// Sets every parameter back to `NULL`.
    public func clearBindings() {
        sqlite3_clear_bindings(handle)
    }

    /// Resets the statement so that it can run again; bindings are kept.
    public func reset() {
        sqlite3_reset(handle)
    }

    // MARK: - Running

    /// Advances the statement by one step.
    ///
    /// - Returns: `true` when a row is available (read it through ``row``), `false` when the statement is done.
    /// - Throws: ``SQLiteError`` with the statement's SQL. The statement is reset after a failure.
    public func step() throws(SQLiteError) -> Bool {
        connection.checkAccess()
        let code = sqlite3_step(handle)
        switch code {
        case SQLITE_ROW:
            return true
        case SQLITE_DONE:
            return false
        default:
            let error = connection.error(code: code, sql: sql)
            sqlite3_reset(handle)
            throw error
        }
    }

    /// The current row; valid only until the next ``step()`` or ``reset()``.
    public var row: Row { Row(handle: handle) }

    /// Runs the statement to completion with the given values bound, then resets it and clears the bindings.
    ///
    /// ```swift
    /// try db.cachedStatement("INSERT INTO users(id, name) VALUES (?, ?)").execute("user1", "Ada")
    /// ```
    ///
    /// - Returns: the number of rows the statement changed (`sqlite3_changes`).
    @inlinable
    @discardableResult
    public func execute<each Value: SQLiteBindable>(_ values: repeat each Value) throws(SQLiteError) -> Int {
        reset()
        defer { clearBindings() }
        try bind(repeat each values)
        while try step() {}
        let changes = connection.changes
        reset()
        return changes
    }

    /// Runs the statement with the given values bound and calls `body` for every row, then resets it and clears
    /// the bindings.
    @inlinable
    public func forEachRow<each Value: SQLiteBindable>(
        _ values: repeat each Value,
        body: (Row) throws -> Void
    ) throws {
        reset()
        defer {
            reset()
            clearBindings()
        }
        try bind(repeat each values)
        while try step() {
            try body(Row(handle: handle))
        }
    }

    /// Runs the statement with the given values bound and decodes its first row, or returns `nil` when it has none.
    @inlinable
    public func fetchOne<each Value: SQLiteBindable, T>(
        _ values: repeat each Value,
        decode: (Row) throws -> T
    ) throws -> T? {
        reset()
        defer {
            reset()
            clearBindings()
        }
        try bind(repeat each values)
        guard try step() else { return nil }
        return try decode(Row(handle: handle))
    }

    /// Runs the statement with the given values bound and decodes every row.
    @inlinable
    public func fetchAll<each Value: SQLiteBindable, T>(
        _ values: repeat each Value,
        decode: (Row) throws -> T
    ) throws -> [T] {
        var result: [T] = []
        try forEachRow(repeat each values, body: { row in result.append(try decode(row)) })
        return result
    }

    /// The query plan SQLite chose for this statement (`EXPLAIN QUERY PLAN`), one detail line per step.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/eqp.html>
    public func queryPlan() throws -> [String] {
        let explain = try connection.makeStatement("EXPLAIN QUERY PLAN " + sql)
        // Parameters stay unbound (NULL): the plan does not depend on their values.
        var details: [String] = []
        while try explain.step() {
            details.append(explain.row.string(at: 3))
        }
        return details
    }
}

@available(*, unavailable, message: "A statement belongs to its connection; use it inside the connection's closure.")
extension Statement: Sendable {}
