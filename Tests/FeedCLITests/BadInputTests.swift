import FeedSync
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// Bad input through the CLI, one row per case: the documented exit status, exactly one line on stderr starting
/// with `Error:`, nothing on stdout, and the database's logical content (`sqlite3 FILE .dump`) unchanged.
///
/// Each case is a shell fragment run by `/bin/sh` so that it can pass bytes Swift strings cannot hold (invalid
/// UTF-8) and set limits (`ulimit -f`). `$F` is the feedsync binary, `$DB` a database holding the demo data,
/// `$DIR` a scratch directory, empty at the start: cases that must create no file run there and exit 99 when one
/// appeared.
// Blocks: waits for `feedsync` child processes and shell scripts.
@Suite(.ownThreads) struct BadInputTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let script: String
        let status: Int32
        var testDescription: String { name }
    }

    static let cases: [Case] = [
        Case(name: "empty post id", script: #"$F --user alice like """#, status: 65),
        Case(name: "100 KB post id", script: #"$F --user alice like "$(head -c 100000 /dev/zero | tr '\0' a)""#, status: 65),
        Case(name: "invalid UTF-8 post id", script: #"$F --user alice like "$(printf 'post\377\376')""#, status: 65),
        Case(name: "invalid UTF-8 body", script: #"$F post add --author alice "$(printf 'bad\377text')""#, status: 65),
        Case(name: "SQL metacharacters in an id", script: #"$F --user alice like "x'; DROP TABLE posts;--""#, status: 65),
        Case(name: "SQL metacharacters in a user id", script: #"$F --user "a' OR '1'='1" like post1"#, status: 65),
        Case(name: "terminal escape in a user id", script: #"$F --user "$(printf 'al\033[31mice')" like post1"#, status: 65),
        Case(name: "empty body", script: #"$F post add --author alice """#, status: 65),
        Case(name: "100 KB body", script: #"$F post add --author alice "$(head -c 100000 /dev/zero | tr '\0' a)""#, status: 65),
        Case(name: "unknown author", script: #"$F post add --author nobody "hello""#, status: 65),
        Case(name: "unknown post", script: #"$F --user alice like post9"#, status: 65),
        Case(name: "unknown viewer", script: #"$F --user nobody feed"#, status: 65),
        Case(name: "negative limit", script: #"$F --user alice feed --limit -1"#, status: 64),
        Case(name: "zero limit", script: #"$F --user alice feed --limit 0"#, status: 64),
        Case(name: "huge limit", script: #"$F --user alice feed --limit 99999999999999999999"#, status: 64),
        Case(name: "huge events limit", script: #"$F events --limit 99999999999"#, status: 64),
        Case(name: "negative since", script: #"$F events --since -5"#, status: 64),
        Case(name: "malformed cursor", script: #"$F --user alice feed --before garbage"#, status: 64),
        Case(name: "cursor with a third part", script: #"$F --user alice feed --before 1.2.3"#, status: 64),
        Case(name: "unknown flag", script: #"$F --user alice feed --frobnicate"#, status: 64),
        Case(name: "unknown command", script: #"$F frobnicate"#, status: 64),
        Case(name: "missing argument", script: #"$F --user alice like"#, status: 64),
        Case(name: "like without a user", script: #"$F like post1"#, status: 64),
        Case(
            name: "response timeout that is no number", script: #"FEEDSYNC_RESPONSE_TIMEOUT_MS=soon $F --user alice like post1"#, status: 64
        ),
        Case(name: "negative busy timeout", script: #"FEEDSYNC_BUSY_TIMEOUT_MS=-5 $F --user alice like post1"#, status: 64),
        Case(name: "unknown log level", script: #"FEEDSYNC_LOG=loud $F --user alice like post1"#, status: 64),
        Case(name: "path is a directory", script: #"$F --db "$DIR" status"#, status: 74),
        Case(name: "file that is not SQLite", script: #"printf 'hello' > "$DIR/x.txt"; $F --db "$DIR/x.txt" status"#, status: 74),
        Case(
            name: "truncated database", script: #"head -c 8192 "$DB" > "$DIR/t.sqlite"; $F --db "$DIR/t.sqlite" --user alice feed"#,
            status: 74),
        Case(name: "missing database for a read", script: #"$F --db "$DIR/none.sqlite" --user alice feed"#, status: 74),
        Case(
            name: "database from a newer schema",
            script:
                #"cp "$DB" "$DIR/new.sqlite"; sqlite3 "$DIR/new.sqlite" "PRAGMA user_version = 99"; $F --db "$DIR/new.sqlite" --user alice like post1"#,
            status: 74),
        Case(
            name: "in-memory database",
            script: #"cd "$DIR" && $F --db :memory: init; s=$?; [ -z "$(ls -A)" ] || s=99; exit $s"#, status: 64),
        Case(
            name: "in-memory database from FEEDSYNC_DB",
            script: #"cd "$DIR" && FEEDSYNC_DB=:memory: $F status; s=$?; [ -z "$(ls -A)" ] || s=99; exit $s"#, status: 64),
        Case(
            name: "SQLite URI as a database path",
            script: #"cd "$DIR" && $F --db 'file:x.sqlite?mode=rwc' init; s=$?; [ -z "$(ls -A)" ] || s=99; exit $s"#, status: 64),
        Case(
            name: "SQLite in-memory URI as a database path",
            script: #"cd "$DIR" && $F --db 'file::memory:' --user alice like post1; s=$?; [ -z "$(ls -A)" ] || s=99; exit $s"#,
            status: 64),
        Case(name: "empty database path", script: #"cd "$DIR" && $F --db '' init; s=$?; [ -z "$(ls -A)" ] || s=99; exit $s"#, status: 64),
        Case(
            name: "full disk (RLIMIT_FSIZE) while seeding",
            script:
                #"$F --db "$DIR/full.sqlite" init >/dev/null && (ulimit -f 200; trap '' XFSZ; LLVM_PROFILE_FILE=/dev/null exec $F --db "$DIR/full.sqlite" seed --posts 20000 --users 100 --likes 1000)"#,
            status: 74),
    ]

    @Test(arguments: cases)
    func badInputGivesItsStatusAndOneLineAndChangesNothing(_ testCase: Case) throws {
        let home = TemporaryDirectory("feedsync-bad")
        let database = home.file("feed.sqlite")
        let scratch = home.file("scratch")
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let environment = CLIRun.environment(home: home.path, ["FEEDSYNC_DB": database])
        let demo = try CLIRun.run(["demo"], environment: environment)
        try #require(demo.status == 0, "\(demo.stderr)")
        let before = try dump(database)
        let before2 = try dump(scratch + "/full.sqlite")

        let result = try shell(
            testCase.script, environment: environment.merging(["F": CLIRun.executable, "DB": database, "DIR": scratch]) { $1 })
        #expect(result.status == testCase.status, "\(testCase.name): \(result.stderr)")
        #expect(result.stdout.isEmpty, "\(testCase.name): stdout \(result.stdout)")
        // A coverage build's profile runtime may complain when `ulimit -f` stops it writing its data at exit (the
        // full-disk case sends its profile to /dev/null so no truncated profile spoils the coverage merge).
        let errorLines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
            .filter { !$0.hasPrefix("LLVM Profile") }
        #expect(errorLines.count == 1, "\(testCase.name): \(result.stderr)")
        #expect(errorLines.first?.hasPrefix("Error: ") == true, "\(testCase.name): \(result.stderr)")
        #expect(!result.stderr.contains("\u{1B}"), "\(testCase.name): an escape reached the terminal")
        #expect(result.stderr.utf8.count < 400, "\(testCase.name): the error echoes too much")
        #expect(try dump(database) == before, "\(testCase.name): the database changed")
        if testCase.name.hasPrefix("full disk") {
            // The seed's transaction rolled back: the database holds the schema and nothing else.
            #expect(try dump(scratch + "/full.sqlite") == before2 || (try rowCount(scratch + "/full.sqlite")) == 0)
        }
    }

    /// The logical content of a database, or an empty string when there is no file.
    private func dump(_ path: String) throws -> String {
        guard FileManager.default.fileExists(atPath: path) else { return "" }
        return try shell(#"sqlite3 "$P" .dump"#, environment: ["P": path, "PATH": "/usr/bin:/bin"]).stdout
    }

    private func rowCount(_ path: String) throws -> Int {
        let out = try shell(
            #"sqlite3 "$P" "SELECT (SELECT count(*) FROM users) + (SELECT count(*) FROM posts) + (SELECT count(*) FROM likes)""#,
            environment: ["P": path, "PATH": "/usr/bin:/bin"]
        ).stdout
        return Int(out.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }

    private func shell(_ script: String, environment: [String: String]) throws -> CLIResult {
        let result = try SpawnedProcess.run("/bin/sh", ["-c", script], environment: environment)
        return CLIResult(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }
}
