internal import CSQLite
public import Foundation

/// The current row of a running ``Statement``: typed reads of its columns by 0-based index.
///
/// A row is a view into the statement, valid only until the statement steps again; copy the values you need.
/// Reads follow SQLite's type conversions (an `INTEGER` read as text gives its decimal digits, `NULL` read as a
/// number gives 0); use ``isNull(at:)`` or the optional readers where `NULL` matters.
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/column_blob.html>
public struct Row {
    let handle: OpaquePointer

    @usableFromInline
    init(handle: OpaquePointer) { self.handle = handle }

    /// The number of columns.
    public var count: Int32 { sqlite3_column_count(handle) }

    /// Whether the column holds `NULL`.
    public func isNull(at index: Int32) -> Bool {
        sqlite3_column_type(handle, index) == SQLITE_NULL
    }

    /// The column as a 64-bit integer.
    public func int64(at index: Int32) -> Int64 {
        sqlite3_column_int64(handle, index)
    }

    /// The column as an `Int`.
    public func int(at index: Int32) -> Int {
        Int(sqlite3_column_int64(handle, index))
    }

    /// The column as a `Bool` (non-zero is `true`).
    public func bool(at index: Int32) -> Bool {
        sqlite3_column_int64(handle, index) != 0
    }

    /// The column as a `Double`.
    public func double(at index: Int32) -> Double {
        sqlite3_column_double(handle, index)
    }

    /// The column as UTF-8 text; `NULL` reads as the empty string.
    public func string(at index: Int32) -> String {
        guard let text = sqlite3_column_text(handle, index) else { return "" }
        let count = Int(sqlite3_column_bytes(handle, index))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// The column as text, or `nil` when it is `NULL`.
    public func optionalString(at index: Int32) -> String? {
        isNull(at: index) ? nil : string(at: index)
    }

    /// The column as an integer, or `nil` when it is `NULL`.
    public func optionalInt64(at index: Int32) -> Int64? {
        isNull(at: index) ? nil : int64(at: index)
    }

    /// The column as bytes; `NULL` reads as empty data.
    public func data(at index: Int32) -> Data {
        guard let bytes = sqlite3_column_blob(handle, index) else { return Data() }
        return Data(bytes: bytes, count: Int(sqlite3_column_bytes(handle, index)))
    }

    /// The column as a ``SQLiteValue`` of its own storage class.
    public func value(at index: Int32) -> SQLiteValue {
        switch sqlite3_column_type(handle, index) {
        case SQLITE_INTEGER: .integer(int64(at: index))
        case SQLITE_FLOAT: .real(double(at: index))
        case SQLITE_TEXT: .text(string(at: index))
        case SQLITE_BLOB: .blob(data(at: index))
        default: .null
        }
    }

    /// The column's name in the result set.
    public func columnName(at index: Int32) -> String {
        sqlite3_column_name(handle, index).map { String(cString: $0) } ?? ""
    }
}

@available(*, unavailable, message: "A row is a view into its statement; copy the values you need.")
extension Row: Sendable {}
