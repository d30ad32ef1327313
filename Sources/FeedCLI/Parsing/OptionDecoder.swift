/// Reads one command's own options after they were matched against its spec, converting and range-checking values.
struct OptionDecoder: Sendable {
    /// Option name → value (`nil` inside for a flag).
    let values: [String: String?]
    /// The command, for errors.
    let command: String

    /// The value of `--name`, if given.
    func string(_ name: String) -> String? {
        values[name] ?? nil
    }

    /// Whether the flag `--name` was given.
    func flag(_ name: String) -> Bool {
        values[name] != nil
    }

    /// The value of `--name` as an integer in `range`, if given.
    func integer(_ name: String, in range: ClosedRange<Int64>) throws(ParserError) -> Int64? {
        guard let text = string(name) else { return nil }
        guard text.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == "-" || $0 == "+") }), let number = Int64(text), range.contains(number)
        else {
            throw .invalidNumber(option: name, value: text, range: range, command: command)
        }
        return number
    }

    /// The value of `--name` as an `Int` in `range`, if given.
    func int(_ name: String, in range: ClosedRange<Int>) throws(ParserError) -> Int? {
        try integer(name, in: Int64(range.lowerBound)...Int64(range.upperBound)).map { Int($0) }
    }
}
