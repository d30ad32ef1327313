package import Foundation

/// A JSON value whose objects keep their keys in the order given, rendered compactly on one line.
///
/// The CLI writes JSON by hand so that key order is the documented one (`Docs/CLI.md`), not alphabetical.
/// Rendering appends UTF-8 bytes to one buffer: a 50-post page is about 11 KB, written without per-character
/// string appends.
package enum JSONValue: Sendable, Hashable {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// An integer.
    package static func number(_ value: Int) -> JSONValue { .int(Int64(value)) }

    /// A string or `null`.
    package static func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }

    /// An ISO 8601 UTC time with milliseconds, such as `2020-09-13T12:26:40.000Z`.
    package static func time(_ date: Date) -> JSONValue { .string(ISOTime.format(date)) }

    /// The compact text.
    package var rendered: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        render(into: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    private func render(into bytes: inout [UInt8]) {
        switch self {
        case .string(let value): Self.quote(value, into: &bytes)
        case .int(let value): Self.appendDecimal(value, to: &bytes)
        case .bool(let value): bytes.append(contentsOf: value ? Self.trueBytes : Self.falseBytes)
        case .null: bytes.append(contentsOf: Self.nullBytes)
        case .array(let values):
            bytes.append(UInt8(ascii: "["))
            for (index, value) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                value.render(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                Self.quote(member.0, into: &bytes)
                bytes.append(UInt8(ascii: ":"))
                member.1.render(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private static let trueBytes: [UInt8] = Array("true".utf8)
    private static let falseBytes: [UInt8] = Array("false".utf8)
    private static let nullBytes: [UInt8] = Array("null".utf8)
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `value` in decimal.
    private static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
        if value < 0 { bytes.append(UInt8(ascii: "-")) }
        // The magnitude as unsigned, so Int64.min has one too.
        var magnitude = value.magnitude
        var digits: [UInt8] = []
        repeat {
            digits.append(UInt8(ascii: "0") + UInt8(magnitude % 10))
            magnitude /= 10
        } while magnitude > 0
        bytes.append(contentsOf: digits.reversed())
    }

    /// RFC 8259 string escaping: `"`, `\`, C0 controls and DEL, and U+2028/U+2029 (line breaks to JavaScript) are
    /// escaped; everything else is copied as UTF-8.
    private static func quote(_ value: String, into bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        let utf8 = value.utf8
        if !utf8.contains(where: needsEscaping) {
            bytes.append(contentsOf: utf8)
        } else {
            var iterator = utf8.makeIterator()
            var pending: [UInt8] = []  // E2 80 seen: maybe U+2028/U+2029
            while let byte = iterator.next() {
                if !pending.isEmpty {
                    if pending.count == 1 {
                        if byte == 0x80 {
                            pending.append(byte)
                            continue
                        }
                        bytes.append(contentsOf: pending)
                        pending.removeAll()
                    } else {
                        pending.removeAll()
                        if byte == 0xA8 || byte == 0xA9 {
                            bytes.append(contentsOf: Array((byte == 0xA8 ? "\\u2028" : "\\u2029").utf8))
                            continue
                        }
                        bytes.append(contentsOf: [0xE2, 0x80])
                    }
                }
                switch byte {
                case UInt8(ascii: "\""): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\"")])
                case UInt8(ascii: "\\"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "\\")])
                case UInt8(ascii: "\n"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "n")])
                case UInt8(ascii: "\r"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "r")])
                case UInt8(ascii: "\t"): bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "t")])
                case 0xE2: pending.append(byte)
                case 0..<0x20, 0x7F:
                    bytes.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    bytes.append(hexDigits[Int(byte >> 4)])
                    bytes.append(hexDigits[Int(byte & 0xF)])
                default: bytes.append(byte)
                }
            }
            bytes.append(contentsOf: pending)
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Whether a UTF-8 byte may start something to escape (0xE2 leads U+2028/U+2029, checked byte by byte).
    private static func needsEscaping(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") || byte == 0x7F || byte == 0xE2
    }

    package static func == (lhs: JSONValue, rhs: JSONValue) -> Bool { lhs.rendered == rhs.rendered }
    package func hash(into hasher: inout Hasher) { hasher.combine(rendered) }
}
