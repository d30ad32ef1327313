/// PostgreSQL array literals (`{…}`), for binding a list of values as one text parameter (`$1::text[]`).
///
/// The literal is a bound value like any other — it is never part of the SQL text. Elements are quoted and their
/// `"` and `\` escaped as the array input syntax requires; `nil` is an unquoted `NULL`.
enum PostgresArray {
    /// A `text[]` literal.
    ///
    /// Built from UTF-8 bytes: `"` and `\` are ASCII and never part of a multi-byte sequence, so escaping bytes is
    /// escaping characters.
    static func text(_ values: [String?]) -> String {
        var literal: [UInt8] = [UInt8(ascii: "{")]
        literal.reserveCapacity(2 + values.reduce(0) { $0 + ($1?.utf8.count ?? 4) + 3 })
        for (index, value) in values.enumerated() {
            if index > 0 { literal.append(UInt8(ascii: ",")) }
            guard let value else {
                literal.append(contentsOf: "NULL".utf8)
                continue
            }
            literal.append(UInt8(ascii: "\""))
            for byte in value.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { literal.append(UInt8(ascii: "\\")) }
                literal.append(byte)
            }
            literal.append(UInt8(ascii: "\""))
        }
        literal.append(UInt8(ascii: "}"))
        return String(decoding: literal, as: UTF8.self)
    }

    /// A `text[]` literal of non-optional strings.
    static func text(_ values: [String]) -> String {
        text(values.map { Optional($0) })
    }

    /// A `bigint[]` literal.
    static func integers(_ values: [Int64?]) -> String {
        "{" + values.map { $0.map { String($0) } ?? "NULL" }.joined(separator: ",") + "}"
    }

    /// A `bigint[]` literal of non-optional integers.
    static func integers(_ values: [Int64]) -> String {
        integers(values.map { Optional($0) })
    }
}
