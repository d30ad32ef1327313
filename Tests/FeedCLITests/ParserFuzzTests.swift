@testable import FeedCLI
import Testing

/// A deterministic random-input driver for the argument parser: it must never crash, and every refusal must be a
/// `ParserError` with a one-line `Error: …` message. Inputs mix real command words and flags with hostile tokens,
/// so the driver reaches deep into decoding and validation rather than stopping at "unknown command".
@Suite struct ParserFuzzTests {
    static let vocabulary: [String] = [
        "init", "status", "user", "add", "list", "post", "feed", "show", "like", "unlike", "toggle", "events", "watch",
        "app", "seed", "check", "demo", "help", "--db", "--user", "--json", "--no-color", "--help", "-h", "--version",
        "--limit", "--before", "--since", "--follow", "--name", "--author", "--id", "--posts", "--users", "--likes",
        "--", "-", "--=", "--limit=", "--limit=5", "--db=", "-x", "-abc", "0", "-1", "1", "1000", "1001",
        "99999999999999999999", "1.2", "1600000000000.7", "post1", "user1", "", " ", "\u{0}", "\u{1B}[2J", "é", "👍",
        "'; DROP TABLE posts;--", "%s%n", "\\", "\"", String(repeating: "a", count: 300),
    ]

    @Test func parserSurvivesRandomCommandLines() {
        var state: UInt64 = 0xF00D
        func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
        var accepted = 0
        var refused = 0
        for _ in 0..<10_000 {
            let count = next(7)
            let arguments = (0..<count).map { _ in
                next(10) == 0 ? String(UnicodeScalar(UInt8(next(128)))) : Self.vocabulary[next(Self.vocabulary.count)]
            }
            do throws(ParserError) {
                _ = try CommandParser.parse(arguments)
                accepted += 1
            } catch {
                refused += 1
                let message = error.message
                #expect(message.hasPrefix("Error: "), "\(arguments)")
                #expect(!message.contains("\n"), "\(arguments)")
            }
        }
        // Both paths are exercised: some random lines are valid commands, most are refused.
        #expect(accepted > 20)
        #expect(refused > 2_000)
    }
}
