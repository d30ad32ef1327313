import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// libpq is loaded when `feedsync` first talks to PostgreSQL, not when it starts: the dynamic loader's own trace
/// (`LD_DEBUG=files`, glibc) lists every shared object a run loads.
// Blocks: waits for `feedsync` child processes.
@Suite(.ownThreads) struct LibPQLoadingTests {
    let home = TemporaryDirectory("feedsync-libpq")

    /// The shared objects a run loaded, by the loader's `file=NAME [0];` lines.
    private func loadedObjects(_ stderr: String) -> [String] {
        stderr.split(separator: "\n").compactMap { line in
            guard let start = line.range(of: "file=") else { return nil }
            let rest = line[start.upperBound...]
            return rest.split(separator: " ", maxSplits: 1).first.map(String.init)
        }
    }

    @Test func aSQLiteRunNeverLoadsLibpq() throws {
        let environment = CLIRun.environment(
            home: home.path, ["FEEDSYNC_DB": home.file("feed.sqlite"), "LD_DEBUG": "files"])
        let demo = try CLIRun.run(["demo"], environment: environment)
        #expect(demo.status == 0, "\(demo.stderr.suffix(500))")
        let loaded = loadedObjects(demo.stderr)
        // The trace is there (the run loaded its own libraries), and libpq is not among them.
        #expect(loaded.contains { $0.hasPrefix("libc.so") }, "no loader trace: \(demo.stderr.prefix(300))")
        #expect(!loaded.contains { $0.contains("libpq") }, "\(loaded)")
    }

    @Test func aPostgreSQLRunLoadsLibpqWhenItConnects() throws {
        guard let location = try TestBackend.postgresql.makeLocation(in: home) else { return }
        let environment = CLIRun.environment(home: home.path, ["FEEDSYNC_DB": location, "LD_DEBUG": "files"])
        let status = try CLIRun.run(["status"], environment: environment)
        #expect(status.status == 0, "\(status.stderr.suffix(500))")
        #expect(loadedObjects(status.stderr).contains { $0.hasPrefix("libpq.so") })
        // Loaded on demand (dlopen), not as a dependency of the program.
        #expect(status.stderr.contains("dynamically loaded by"))
    }

    /// Without libpq (here: `FEEDSYNC_LIBPQ` names a file that does not exist) a PostgreSQL location is one line
    /// naming the library and the fix, exit 74, and nothing else happens; SQLite keeps working.
    @Test func withoutLibpqAPostgreSQLLocationIsOneLineNamingTheFix() throws {
        let missing = home.file("no-such-dir/libpq.so.5")
        let environment = CLIRun.environment(
            home: home.path, ["FEEDSYNC_DB": "postgresql://app:hunter2@127.0.0.1:1/feed", "FEEDSYNC_LIBPQ": missing])
        for arguments in [["status"], ["init"], ["feed"]] {
            let result = try CLIRun.run(arguments, environment: environment)
            #expect(result.status == 74, "\(arguments): \(result.stderr)")
            #expect(result.stdout.isEmpty)
            #expect(result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            #expect(result.stderr.contains("PostgreSQL's client library could not be loaded"), "\(result.stderr)")
            #expect(result.stderr.contains(missing) && result.stderr.contains("set FEEDSYNC_LIBPQ"), "\(result.stderr)")
            #expect(!result.stderr.contains("hunter2"))
        }
        let sqliteEnvironment = CLIRun.environment(
            home: home.path, ["FEEDSYNC_DB": home.file("feed.sqlite"), "FEEDSYNC_LIBPQ": missing])
        let sqlite = try CLIRun.run(["demo"], environment: sqliteEnvironment)
        #expect(sqlite.status == 0, "\(sqlite.stderr)")
    }
}
