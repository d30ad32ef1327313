/// PostgreSQL array literals (`{…}`), for binding a list of values as one text parameter (`$1::text[]`).
///
/// The literal is a bound value like any other — it is never part of the SQL text. Elements are quoted and their
/// `"` and `\` escaped as the array input syntax requires; `nil` is an unquoted `NULL`.
enum PostgresArray {
    /// A `text[]` literal.
    static func text(_ values: [String?]) -> String {
        var literal = "{"
        for (index, value) in values.enumerated() {
            if index > 0 { literal += "," }
            guard let value else {
                literal += "NULL"
                continue
            }
            literal += "\""
            for character in value.unicodeScalars {
                if character == "\"" || character == "\\" { literal += "\\" }
                literal.unicodeScalars.append(character)
            }
            literal += "\""
        }
        return literal + "}"
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
