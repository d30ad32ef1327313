@testable import FeedCLI
import FeedJSON
import FeedSync
import Foundation
import Testing

@Suite struct OutputTests {
    @Test func sanitizerRemovesEscapesAndLineBreaks() {
        #expect(TextSanitizer.clean("a\u{1B}[2Jb\nc\td\u{7}\u{9B}e\u{202E}f") == "a[2Jb c def")
    }

    @Test func shortenedTextEndsWithAnEllipsisWithinTheWidth() {
        let text = TextSanitizer.shortened(String(repeating: "x", count: 100), width: 10)
        #expect(text == String(repeating: "x", count: 9) + "…")
        #expect(TextSanitizer.shortened("short", width: 10) == "short")
        #expect(DisplayWidth.of(TextSanitizer.shortened(String(repeating: "한", count: 20), width: 10)) <= 10)
    }

    @Test func jsonKeepsKeyOrderAndEscapes() {
        let value = JSONValue.object([("z", .int(1)), ("a", .string("q\"\\\n\u{1}")), ("n", .null), ("b", .bool(false))])
        #expect(value.rendered == #"{"z":1,"a":"q\"\\\n\u0001","n":null,"b":false}"#)
        #expect(JSONValue.string("a\u{2028}b\u{2029}\u{7F}é€\u{E2}").rendered == #""a\u2028b\u2029\u007fé€\#u{E2}""#)
        #expect(JSONValue.int(.min).rendered == "-9223372036854775808")
        #expect(JSONValue.array([.int(0), .int(-12), .bool(true)]).rendered == "[0,-12,true]")
    }

    @Test func timesAreISO8601UTCWithMilliseconds() {
        #expect(ISOTime.format(Date(timeIntervalSince1970: 1_600_000_000.123)) == "2020-09-13T12:26:40.123Z")
        #expect(ISOTime.format(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        // The arithmetic agrees with the C library's calendar, leap years and negative times included.
        for seconds in stride(from: -2_208_988_800, through: 4_102_444_800, by: 7_654_321) + [951_782_400, 951_868_799, -1] {
            var time = time_t(seconds)
            var parts = tm()
            gmtime_r(&time, &parts)
            let expected = String(
                format: "%04d-%02d-%02dT%02d:%02d:%02d.250Z", Int(parts.tm_year) + 1900, Int(parts.tm_mon) + 1, Int(parts.tm_mday),
                Int(parts.tm_hour), Int(parts.tm_min), Int(parts.tm_sec))
            #expect(ISOTime.format(Date(timeIntervalSince1970: Double(seconds) + 0.25)) == expected)
        }
    }

    @Test func feedTableAlignsAndMarksOnlyLikedPosts() {
        let posts = [
            Post(id: "post10", authorID: "bob", body: "I ❤️ this", createdAt: Date(), likeCount: 12, sequence: 2),
            Post(id: "p1", authorID: "alice", body: "evil\u{1B}]0;title\u{7}", createdAt: Date(), likeCount: 1, sequence: 1),
        ]
        let lines = TextShapes.feed(posts: posts, liked: ["p1"], style: Style(enabled: false))
        #expect(
            lines == [
                "POST    AUTHOR  LIKES  TEXT",
                "post10  bob        12  I ♥ this",
                "p1      alice       1  evil]0;title ❤️",
            ])
    }

    @Test func appLinesParseIntoActions() {
        #expect(AppAction.parse("open post3") == .open(postID: "post3"))
        #expect(AppAction.parse("  like ") == .like)
        #expect(AppAction.parse("") == nil)
        #expect(AppAction.parse("# comment") == nil)
        #expect(AppAction.parse("QUIT") == .quit)
        #expect(AppAction.parse("open") == .invalid("use 'open POST', such as 'open post3'."))
        #expect(AppAction.parse("back now") == .invalid("'back' takes no argument. Type 'help' for commands."))
        if case .invalid = AppAction.parse("dance") {} else { Issue.record("expected invalid") }
    }
}
