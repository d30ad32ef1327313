/// A value bound to, or read from, a statement of yours (a transactional durable subscriber's `execute` and `fetch`).
public enum DatabaseValue: Sendable, Hashable {
    /// SQL `NULL`.
    case null
    /// A 64-bit integer (`INTEGER`, `BIGINT`).
    case integer(Int64)
    /// A double (`REAL`, `DOUBLE PRECISION`).
    case real(Double)
    /// Text (`TEXT`).
    case text(String)
    /// Bytes (`BLOB`, `BYTEA`).
    case blob([UInt8])

    /// The integer, or `nil` for any other case.
    public var integer: Int64? { if case .integer(let value) = self { value } else { nil } }
    /// The text, or `nil` for any other case.
    public var text: String? { if case .text(let value) = self { value } else { nil } }
}

extension DatabaseValue: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral, ExpressibleByNilLiteral {
    /// An integer literal.
    public init(integerLiteral value: Int64) { self = .integer(value) }
    /// A string literal.
    public init(stringLiteral value: String) { self = .text(value) }
    /// `nil` is SQL `NULL`.
    public init(nilLiteral: ()) { self = .null }
}
