internal import CLibPQ
internal import FeedCore
internal import Foundation

/// A libpq result (`PGresult`), cleared when released.
///
/// In text format (the default) the typed accessors parse the server's text output: `int8`, `int4`, `bool`
/// (`t`/`f`), `float8`, `bytea` (hex). A result asked for in binary format (`binary`, the feed page statements)
/// is read by ``int64(_:_:)``, ``bool(_:_:)`` and ``string(_:_:)`` only: integers as big-endian `int8`, `bool` as
/// one byte, text as its bytes (the same in both formats).
final class PostgresResult {
    private let raw: OpaquePointer
    /// Whether every column came in PostgreSQL's binary format.
    let binary: Bool

    init(_ raw: OpaquePointer, binary: Bool = false) {
        self.raw = raw
        self.binary = binary
    }

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

    // The accessors below read a field's length first: libpq reports a `NULL` field with length 0, so a field with
    // bytes is not `NULL` and needs no `PQgetisnull` call — one libpq call fewer per field (of three) on a feed
    // page's 400 fields. Only an empty field is asked whether it is `NULL`.

    /// The field's text, or `nil` for `NULL`.
    func string(_ row: Int, _ column: Int) -> String? {
        let (row, column) = (Int32(row), Int32(column))
        let length = Int(PQgetlength(raw, row, column))
        if length == 0 { return PQgetisnull(raw, row, column) != 0 ? nil : "" }
        guard let text = PQgetvalue(raw, row, column) else { return nil }
        // The field's length is known: no strlen, one validating copy.
        return String(decoding: UnsafeRawBufferPointer(start: text, count: length), as: UTF8.self)
    }

    /// The field as an integer, or `nil` for `NULL` (or text that is not a 64-bit integer).
    func int64(_ row: Int, _ column: Int) -> Int64? {
        let (row, column) = (Int32(row), Int32(column))
        // `NULL` has length 0, which neither format reads as an integer.
        let length = Int(PQgetlength(raw, row, column))
        guard length > 0, let text = PQgetvalue(raw, row, column) else { return nil }
        guard binary else { return Self.parseInt64(text, length: length) }
        return Self.bigEndianInteger(UnsafeRawPointer(text), length: length)
    }

    /// The field as a boolean (`t`; binary: a non-zero byte), or `nil` for `NULL`.
    func bool(_ row: Int, _ column: Int) -> Bool? {
        let (row, column) = (Int32(row), Int32(column))
        // Both formats send one byte; `NULL` has length 0.
        guard PQgetlength(raw, row, column) == 1, let value = PQgetvalue(raw, row, column)?.pointee else { return nil }
        return binary ? value != 0 : value == CChar(UInt8(ascii: "t"))
    }

    /// A binary `int8` field (8 bytes, big-endian), or `nil` for another length. (The binary statements select only
    /// `BIGINT` integers.)
    static func bigEndianInteger(_ bytes: UnsafeRawPointer, length: Int) -> Int64? {
        length == 8 ? Int64(bigEndian: bytes.loadUnaligned(as: Int64.self)) : nil
    }

    /// The first column of the first row as an integer, or `nil` when there is no row or it is `NULL`.
    var scalarInt64: Int64? { rowCount > 0 && columnCount > 0 ? int64(0, 0) : nil }

    /// The field as a ``DatabaseValue`` chosen by the column's type: integers (and `bool` as 0/1) as
    /// ``DatabaseValue/integer(_:)``, floating point as ``DatabaseValue/real(_:)``, `numeric` as an integer when it
    /// is one and a double otherwise, `bytea` as ``DatabaseValue/blob(_:)``, everything else as text.
    func value(_ row: Int, _ column: Int) -> DatabaseValue {
        precondition(!binary, "PostgresResult.value reads text-format results only")
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
