public import Foundation

/// A Swift value that can be bound to a statement parameter.
///
/// FeedSync binds every SQL value through this protocol and never interpolates values into SQL text. Conforming
/// types: `Int64`, `Int`, `Int32`, `Bool` (0 or 1), `Double`, `String`, `Data`, `[UInt8]`, ``SQLiteValue``, and
/// `Optional` of any of them (`nil` binds `NULL`).
///
/// Related SQLite documentation: <https://www.sqlite.org/c3ref/bind_blob.html>
public protocol SQLiteBindable {
    /// The value in SQLite's storage classes.
    var sqliteValue: SQLiteValue { get }
}

extension Int64: SQLiteBindable {
    /// The integer as `INTEGER`.
    public var sqliteValue: SQLiteValue { .integer(self) }
}

extension Int: SQLiteBindable {
    /// The integer as `INTEGER`.
    public var sqliteValue: SQLiteValue { .integer(Int64(self)) }
}

extension Int32: SQLiteBindable {
    /// The integer as `INTEGER`.
    public var sqliteValue: SQLiteValue { .integer(Int64(self)) }
}

extension Bool: SQLiteBindable {
    /// `true` as 1, `false` as 0.
    public var sqliteValue: SQLiteValue { .integer(self ? 1 : 0) }
}

extension Double: SQLiteBindable {
    /// The number as `REAL`.
    public var sqliteValue: SQLiteValue { .real(self) }
}

extension String: SQLiteBindable {
    /// The string as UTF-8 `TEXT`.
    public var sqliteValue: SQLiteValue { .text(self) }
}

extension Data: SQLiteBindable {
    /// The bytes as a `BLOB`.
    public var sqliteValue: SQLiteValue { .blob(self) }
}

extension Array: SQLiteBindable where Element == UInt8 {
    /// The bytes as a `BLOB`.
    public var sqliteValue: SQLiteValue { .blob(Data(self)) }
}

extension SQLiteValue: SQLiteBindable {
    /// The value itself.
    public var sqliteValue: SQLiteValue { self }
}

extension Optional: SQLiteBindable where Wrapped: SQLiteBindable {
    /// The wrapped value, or `NULL`.
    public var sqliteValue: SQLiteValue {
        switch self {
        case .some(let value): value.sqliteValue
        case .none: .null
        }
    }
}
