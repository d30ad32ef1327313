import FeedCore
import FeedSQLiteBackend
import Foundation
import Testing

@Suite struct SecurityTests {
    static let sourcesFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources")

    /// Every string literal in `Sources` that looks like SQL, with its file and line.
    static func sqlLiterals() throws -> [(file: String, line: Int, text: String)] {
        var found: [(String, Int, String)] = []
        let files =
            FileManager.default.enumerator(atPath: sourcesFolder.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        let keywords = try Regex(#"\b(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|PRAGMA|BEGIN|VALUES|WHERE)\b"#)
        let stringLiteral = try Regex(#""((?:[^"\\]|\\.)*)""#)
        let statementStart = try Regex(
            #"^"(SELECT|INSERT|UPDATE|DELETE|CREATE|DROP|PRAGMA|BEGIN|EXPLAIN|SAVEPOINT|RELEASE|ROLLBACK|COMMIT)\b"#)
        for file in files {
            let text = try String(contentsOf: sourcesFolder.appendingPathComponent(file), encoding: .utf8)
            // Single-line literals and multi-line (""" … """) literals.
            var inMulti = false
            var multiStart = 0
            var multi = ""
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let count = line.components(separatedBy: "\"\"\"").count - 1
                if inMulti {
                    if count % 2 == 1 {
                        inMulti = false
                        if multi.contains(keywords) { found.append((file, multiStart + 1, multi)) }
                    } else {
                        multi += line + "\n"
                    }
                    continue
                }
                if count % 2 == 1 {
                    inMulti = true
                    multiStart = index
                    multi = ""
                    continue
                }
                for match in line.matches(of: stringLiteral) {
                    let literal = String(line[match.range])
                    if literal.contains(statementStart) {
                        found.append((file, index + 1, literal))
                    }
                }
            }
        }
        return found
    }

    @Test func sqlLiteralsInSourcesNeverInterpolateValues() throws {
        let literals = try Self.sqlLiterals()
        #expect(literals.count > 20, "the scanner should find the SQL of the repositories")
        let interpolated = literals.filter { $0.text.contains("\\(") }
        #expect(interpolated.isEmpty, "SQL with string interpolation: \(interpolated.map { "\($0.file):\($0.line)" })")
    }

    @Test(arguments: [
        "not-a-cursor", "", ".", "1.", ".1", "1.2.3", "-1.2", "1.-2", "１.２", "99999999999999999999.1", "1e3.2", " 1.2", "1.2 ", "0x10.1",
        "1.2\u{0}",
    ])
    func malformedCursorsAreRejected(text: String) {
        #expect(FeedCursor(text) == nil)
    }

    @Test func cursorRoundTrips() {
        let cursor = FeedCursor(createdAtMillis: 1_600_000_000_000, sequence: 42)
        #expect(FeedCursor(cursor.description) == cursor)
    }

    /// A deterministic random-input driver for the cursor decoder: it never crashes, and whatever it accepts
    /// prints back to the same text.
    @Test func cursorDecoderSurvivesRandomInput() {
        var state: UInt64 = 0x5EED
        func next() -> UInt64 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return state >> 33
        }
        let alphabet = Array("0123456789..-+ eE\u{0}\u{FF10}x9")
        for _ in 0..<200_000 {
            let length = Int(next() % 24)
            let text = String((0..<length).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] })
            if let cursor = FeedCursor(text) {
                #expect(cursor.description == text || FeedCursor(cursor.description) == cursor)
                #expect(cursor.createdAtMillis >= 0 && cursor.sequence >= 0)
            }
        }
    }
}
