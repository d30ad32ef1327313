internal import Foundation

/// A JSON value whose objects keep their keys in the order given, rendered compactly on one line.
///
/// The CLI writes JSON by hand so that key order is the documented one (`Docs/CLI.md`), not alphabetical.
enum JSONValue: Sendable, Hashable {
    case string(String)
    case int(Int64)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// An integer.
    static func number(_ value: Int) -> JSONValue { .int(Int64(value)) }

    /// A string or `null`.
    static func optional(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }

    /// An ISO 8601 UTC time with milliseconds, such as `2020-09-13T12:26:40.000Z`.
    static func time(_ date: Date) -> JSONValue { .string(ISOTime.format(date)) }

    /// The compact text.
    var rendered: String {
        var text = ""
        render(into: &text)
        return text
    }

    private func render(into text: inout String) {
        switch self {
        case .string(let value): Self.quote(value, into: &text)
        case .int(let value): text += String(value)
        case .bool(let value): text += value ? "true" : "false"
        case .null: text += "null"
        case .array(let values):
            text += "["
            for (index, value) in values.enumerated() {
                if index > 0 { text += "," }
                value.render(into: &text)
            }
            text += "]"
        case .object(let members):
            text += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { text += "," }
                Self.quote(member.0, into: &text)
                text += ":"
                member.1.render(into: &text)
            }
            text += "}"
        }
    }

    /// RFC 8259 string escaping; everything else is written as UTF-8.
    private static func quote(_ value: String, into text: inout String) {
        text += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case "\u{2028}": text += "\\u2028"
            case "\u{2029}": text += "\\u2029"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    let hex = String(scalar.value, radix: 16)
                    text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
        }
        text += "\""
    }

    static func == (lhs: JSONValue, rhs: JSONValue) -> Bool { lhs.rendered == rhs.rendered }
    func hash(into hasher: inout Hasher) { hasher.combine(rendered) }
}
