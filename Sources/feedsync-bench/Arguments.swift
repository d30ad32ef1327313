import Foundation

/// `SUBCOMMAND [--flag value | --switch]...`: every flag must be read, so a typo is an error. A flag followed by
/// another flag (or by nothing) is a switch, read with ``flag(_:)``.
final class Arguments {
    let command: String
    private var values: [String: String] = [:]
    private var unread: Set<String> = []

    init(_ argv: [String]) throws {
        guard let command = argv.first else { throw BenchError("missing subcommand; try w1 … w10") }
        self.command = command
        var rest = argv.dropFirst()
        while let flag = rest.popFirst() {
            guard flag.hasPrefix("--"), flag.count > 2 else { throw BenchError("expected --flag value, got \(flag)") }
            if let next = rest.first, !next.hasPrefix("--") {
                values[String(flag.dropFirst(2))] = rest.removeFirst()
            } else {
                values[String(flag.dropFirst(2))] = ""
            }
        }
        unread = Set(values.keys)
    }

    func string(_ name: String, _ defaultValue: String) -> String {
        unread.remove(name)
        return values[name] ?? defaultValue
    }

    func optionalString(_ name: String) -> String? {
        unread.remove(name)
        return values[name]
    }

    /// Whether the switch `--name` was given (`--name` alone; a value after it is refused).
    func flag(_ name: String) throws -> Bool {
        unread.remove(name)
        guard let value = values[name] else { return false }
        guard value.isEmpty else { throw BenchError("--\(name) takes no value, got \(value)") }
        return true
    }

    func int(_ name: String, _ defaultValue: Int) throws -> Int {
        let text = string(name, String(defaultValue))
        guard let value = Int(text), value >= 0 else { throw BenchError("--\(name) needs a non-negative integer, got \(text)") }
        return value
    }

    func intList(_ name: String, _ defaultValue: [Int]) throws -> [Int] {
        let text = string(name, defaultValue.map(String.init).joined(separator: ","))
        let list = text.split(separator: ",").compactMap { Int($0) }
        guard !list.isEmpty, list.allSatisfy({ $0 > 0 }) else { throw BenchError("--\(name) needs positive integers like 1,10,100") }
        return list
    }

    /// Fails when a flag was given that no code read.
    func finish() throws {
        if let flag = unread.sorted().first { throw BenchError("unknown flag --\(flag)") }
    }
}

/// A usage or setup error: exit status 2.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
