public import Foundation

/// A value as SQLite stores it: one of its five storage classes.
///
/// Related SQLite documentation: <https://www.sqlite.org/datatype3.html>
public enum SQLiteValue: Sendable, Hashable {
    /// An `INTEGER`.
    case integer(Int64)
    /// A `REAL`.
    case real(Double)
    /// A `TEXT`, UTF-8.
    case text(String)
    /// A `BLOB`.
    case blob(Data)
    /// `NULL`.
    case null
}
