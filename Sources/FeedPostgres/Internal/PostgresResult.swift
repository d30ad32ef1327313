internal import CLibPQ
internal import FeedCore
internal import Foundation

/// A libpq result (`PGresult`) in text format, cleared when released.
///
/// The typed accessors parse the server's text output: `int8`, `int4`, `bool` (`t`/`f`), `float8`, `bytea` (hex).
final class PostgresResult {
    private let raw: OpaquePointer

    init(_ raw: OpaquePointer) { self.raw = raw }

    deinit { PQclear(raw) }

    /// The number of rows.
    var rowCount: Int { Int(PQntuples(raw)) }

    /// The number of columns.
    var columnCount: Int { Int(PQnfields(raw)) }

    /// The number of rows the command changed (`PQcmdTuples`), 0 when it reports none.
    var changedRows: Int {
        Int(String(cString: PQcmdTuples(raw))) ?? 0
    }

    /// The command tag, such as `COMMIT` or `ROLLBACK`.
    var commandStatus: String { String(cString: PQcmdStatus(raw)) }

    /// Whether the field is SQL `NULL`.
    func isNull(_ row: Int, _ column: Int) -> Bool {
        PQgetisnull(raw, Int32(row), Int32(column)) != 0
    }

    /// The field's text, or `nil` for `NULL`.
    func string(_ row: Int, _ column: Int) -> String? {
        if isNull(row, column) { return nil }
        guard let text = PQgetvalue(raw, Int32(row), Int32(column)) else { return nil }
        // The field's length is known: no strlen, one validating copy.
        let length = Int(PQgetlength(raw, Int32(row), Int32(column)))
        return String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self)
    }

    /// The field as an integer, or `nil` for `NULL` (or text that is not a 64-bit integer).
    func int64(_ row: Int, _ column: Int) -> Int64? {
        if isNull(row, column) { return nil }
        guard let text = PQgetvalue(raw, Int32(row), Int32(column)) else { return nil }
        return Self.parseInt64(text, length: Int(PQgetlength(raw, Int32(row), Int32(column))))
    }

    /// The field as a boolean (`t`), or `nil` for `NULL`.
    func bool(_ row: Int, _ column: Int) -> Bool? {
        if isNull(row, column) { return nil }
        return PQgetvalue(raw, Int32(row), Int32(column))?.pointee == CChar(UInt8(ascii: "t"))
    }

    /// The first column of the first row as an integer, or `nil` when there is no row or it is `NULL`.
    var scalarInt64: Int64? { rowCount > 0 && columnCount > 0 ? int64(0, 0) : nil }

    /// The field as a ``DatabaseValue`` chosen by the column's type: integers (and `bool` as 0/1) as
    /// ``DatabaseValue/integer(_:)``, floating point as ``DatabaseValue/real(_:)``, `numeric` as an integer when it
    /// is one and a double otherwise, `bytea` as ``DatabaseValue/blob(_:)``, everything else as text.
    func value(_ row: Int, _ column: Int) -> DatabaseValue {
        guard let text = string(row, column) else { return .null }
        switch PQftype(raw, Int32(column)) {
        case 20, 21, 23, 26: return Int64(text).map(DatabaseValue.integer) ?? .text(text)
        case 16: return .integer(text == "t" ? 1 : 0)
        case 700, 701: return Double(text).map(DatabaseValue.real) ?? .text(text)
        case 1700:
            if let integer = Int64(text) { return .integer(integer) }
            return Double(text).map(DatabaseValue.real) ?? .text(text)
        case 17: return Self.decodeHex(text).map(DatabaseValue.blob) ?? .text(text)
        default: return .text(text)
        }
    }

    /// Every row as values.
    func rows() -> [[DatabaseValue]] {
        (0..<rowCount).map { row in (0..<columnCount).map { column in value(row, column) } }
    }

    /// Parses a decimal integer without allocating; `nil` when it is not one or overflows.
    static func parseInt64(_ text: UnsafePointer<CChar>, length: Int) -> Int64? {
        guard length > 0 else { return nil }
        var index = 0
        var negative = false
        if text[0] == CChar(UInt8(ascii: "-")) {
            negative = true
            index = 1
            guard length > 1 else { return nil }
        }
        var value: Int64 = 0
        while index < length {
            let digit = Int64(text[index]) - Int64(UInt8(ascii: "0"))
            guard digit >= 0, digit <= 9 else { return nil }
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return nil }
            value = next
            index += 1
        }
        return value
    }

    /// Decodes `bytea`'s hex output (`\x0a1b…`).
    static func decodeHex(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else { return nil }
        func nibble(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }
}
