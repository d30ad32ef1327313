import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// The following commands (`events --follow`, `watch`, `app`) end with status 74 and one line on stderr when the
/// database file they follow is deleted or replaced, instead of staying silent forever on the old file.
// Blocks: waits for `feedsync` child processes, one of them following events.
@Suite(.ownThreads) struct DatabaseReplacedTests {
    let home = TemporaryDirectory("feedsync-replaced")
    var database: String { home.file("feed.sqlite") }

    var environment: [String: String] { CLIRun.environment(home: home.path, ["FEEDSYNC_DB": database]) }

    /// The followed database (the demo data), and another one next to it to move over it.
    func makeDatabases() throws -> String {
        let demo = try CLIRun.run(["demo"], environment: environment)
        try #require(demo.status == 0, "\(demo.stderr)")
        let replacement = home.file("replacement.sqlite")
        let created = try CLIRun.run(["init"], environment: CLIRun.environment(home: home.path, ["FEEDSYNC_DB": replacement]))
        try #require(created.status == 0, "\(created.stderr)")
        return replacement
    }

    var expectedError: String {
        "Error: the database file \"\(database)\" was deleted or replaced while it was followed; start again to follow "
            + "the new file.\n"
    }

    /// Likes a post from another process, so that a follower prints it once its change feed runs.
    func likeFromAnotherProcess() throws {
        let like = try CLIRun.run(["like", "post4", "--user", "carol"], environment: environment)
        try #require(like.status == 0, "\(like.stderr)")
    }

    @Test func eventsFollowExitsWith74WhenTheFileIsReplaced() throws {
        let replacement = try makeDatabases()
        let follower = try RunningCLI(["events", "--follow"], environment: environment)
        #expect(follower.waitFor("SEQ"))
        // The backlog is printed before the feed starts: wait for a live event, then replace the file.
        try likeFromAnotherProcess()
        #expect(follower.waitFor("carol"))
        #expect(rename(replacement, database) == 0)
        let status = follower.waitForExit()
        #expect(status == 74)
        #expect(follower.stderr == expectedError)
    }

    @Test func eventsFollowExitsWith74WhenTheFileIsDeleted() throws {
        _ = try makeDatabases()
        let follower = try RunningCLI(["events", "--follow", "--json", "--since", "8"], environment: environment)
        #expect(follower.waitFor(#"{"seq":9,"#))
        try likeFromAnotherProcess()
        #expect(follower.waitFor(#""userID":"carol""#))
        #expect(unlink(database) == 0)
        #expect(follower.waitForExit() == 74)
        #expect(follower.stderr == expectedError)
    }

    @Test func watchExitsWith74WhenTheFileIsReplaced() throws {
        let replacement = try makeDatabases()
        let watcher = try RunningCLI(["watch", "--user", "bob"], environment: environment)
        #expect(watcher.waitFor("post1"))
        #expect(rename(replacement, database) == 0)
        #expect(watcher.waitForExit() == 74)
        #expect(watcher.stderr == expectedError)
    }

    @Test func appExitsWith74WhenTheFileIsReplaced() throws {
        let replacement = try makeDatabases()
        let app = try RunningCLI(["app", "--user", "alice"], environment: environment)
        #expect(app.waitFor("Feed for alice"))
        #expect(rename(replacement, database) == 0)
        #expect(app.waitForExit() == 74)
        #expect(app.stderr == expectedError)
    }
}
