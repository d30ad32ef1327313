/// Splits `argv` into tokens (STYLE §12 step 1, after swift-argument-parser's `SplitArguments`).
///
/// - `--` is the terminator: every later element is a value, even `--json`.
/// - `--name=value` splits at the first `=`; `--name` has no value (the parser decides whether the next token is
///   its value).
/// - `-abc` is the short flags `a`, `b`, `c`; `-` alone and negative numbers such as `-5` are values, so that
///   `--limit -5` reports an invalid limit rather than an unknown flag.
enum Tokenizer {
    /// Tokenizes `arguments` (without the program name).
    static func tokenize(_ arguments: [String]) -> [Token] {
        var tokens: [Token] = []
        tokens.reserveCapacity(arguments.count)
        var terminated = false
        for (index, argument) in arguments.enumerated() {
            if terminated {
                tokens.append(Token(kind: .value(argument), index: index))
            } else if argument == "--" {
                terminated = true
                tokens.append(Token(kind: .terminator, index: index))
            } else if argument.hasPrefix("--") {
                let body = argument.dropFirst(2)
                if let equals = body.firstIndex(of: "=") {
                    let name = String(body[..<equals])
                    let value = String(body[body.index(after: equals)...])
                    tokens.append(Token(kind: .option(name: name, value: value), index: index))
                } else {
                    tokens.append(Token(kind: .option(name: String(body), value: nil), index: index))
                }
            } else if argument.hasPrefix("-"), argument.count > 1, !isNumeric(argument.dropFirst()) {
                for letter in argument.dropFirst() {
                    tokens.append(Token(kind: .short(letter), index: index))
                }
            } else {
                tokens.append(Token(kind: .value(argument), index: index))
            }
        }
        return tokens
    }

    private static func isNumeric(_ text: Substring) -> Bool {
        guard let first = text.first else { return false }
        return first.isASCII && first.isNumber
    }
}
