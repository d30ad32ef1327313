@testable import FeedCLI
import Testing

@Suite struct TokenizerTests {
    @Test func splitsValuesOptionsShortFlagsAndTerminator() {
        let tokens = Tokenizer.tokenize(["feed", "--limit", "5", "--db=/tmp/x", "-h", "--", "--json", "-5"])
        #expect(
            tokens.map(\.kind) == [
                .value("feed"), .option(name: "limit", value: nil), .value("5"), .option(name: "db", value: "/tmp/x"),
                .short("h"), .terminator, .value("--json"), .value("-5"),
            ])
        #expect(tokens.map(\.index) == [0, 1, 2, 3, 4, 5, 6, 7])
    }

    @Test func clustersSplitIntoLettersWithTheSameIndex() {
        let tokens = Tokenizer.tokenize(["-hx"])
        #expect(tokens == [Token(kind: .short("h"), index: 0), Token(kind: .short("x"), index: 0)])
    }

    @Test func negativeNumbersAndLoneDashAreValues() {
        #expect(Tokenizer.tokenize(["-12", "-"]).map(\.kind) == [.value("-12"), .value("-")])
    }

    @Test func equalsSplitsAtTheFirstOnlyAndAllowsEmptyValues() {
        #expect(
            Tokenizer.tokenize(["--name=a=b", "--db="]).map(\.kind) == [
                .option(name: "name", value: "a=b"), .option(name: "db", value: ""),
            ])
    }
}
