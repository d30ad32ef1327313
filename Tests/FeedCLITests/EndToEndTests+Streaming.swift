import FeedSync
import FeedSQLite
import FeedSQLiteBackend
import FeedMigrations
import FeedTestSupport
import Foundation
import Synchronization
import FeedTestThreads
import Testing

/// Help and version, the interactive app, and the commands that follow changes as they happen.
extension EndToEndTests {
    // MARK: - Help and version

    @Test func helpForACommandIsGeneratedFromItsMetadata() throws {
        let result = try feedsync("show", "--help")
        #expect(result.status == 0)
        #expect(
            result.stdout == """
                Show one post: text, author, time, likes, and whether the viewer likes it.

                Usage: feedsync show POST

                Arguments:
                  POST  The post's id.

                Global options: --db PATH, --user ID, --json, --no-color, -h/--help, --version (see 'feedsync --help').

                """)
        #expect(try feedsync("-h", "like").stdout.contains("Acts as --user ID (or $FEEDSYNC_USER), which is required."))
        #expect(
            try feedsync("help", "user").stdout == """
                Usage: feedsync user <command> [options]

                Commands:
                  user add     Create a user.
                  user list    List the users, ordered by id.
                  user delete  Erase a user: their posts, likes, tokens and replicas' sync records; the log no longer names them.

                See 'feedsync user <command> --help' for details.

                """)
    }

    @Test func topLevelHelpListsEveryCommand() throws {
        let result = try feedsync("--help")
        #expect(result.status == 0)
        #expect(result.stdout == HelpSnapshots.overview)
        #expect(try feedsync("--version").stdout == "feedsync \(FeedSyncCLIVersion.expected)\n")
    }

    // MARK: - Interactive and streaming

    @Test(arguments: TestBackend.allCases) func appDrivenThroughPipedInputShowsTheHeartAfterBack(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let result = try feedsync("app", "--user", "alice", stdin: "open post3\nlike\nback\nquit\n")
        #expect(result.status == 0, "\(result.stderr)")
        let screens = result.stdout.components(separatedBy: "\n\n")
        let afterBack = try #require(screens.last { $0.hasPrefix("Feed for alice") })
        let post3 = try #require(afterBack.split(separator: "\n").first { $0.hasPrefix("post3") })
        #expect(post3.hasSuffix("❤️"))
        #expect(post3.contains("  1  "))
        #expect(screens.contains { $0.contains("1 like ❤️ (you like it)") })
        #expect(result.stderr.isEmpty)
    }

    @Test(arguments: TestBackend.allCases) func appReportsBadInputAndKeepsGoing(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let result = try feedsync("app", "--user", "alice", stdin: "like\nopen post9\ndance\nhelp\n")
        #expect(result.status == 0)
        #expect(
            result.stderr.split(separator: "\n") == [
                "Error: open a post first, such as 'open post1'.",
                "Error: no post \"post9\". See 'feedsync feed' for ids.",
                "Error: unknown command \"dance\". Type 'help' for commands.",
            ])
        #expect(result.stdout.contains("open POST     open a post's detail view"))
    }

    @Test(arguments: TestBackend.allCases) func followSeesALikeFromAnotherProcessAndEndsCleanlyOnSIGINT(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let follower = try RunningCLI(["events", "--follow", "--json", "--since", "8"], environment: environment())
        #expect(follower.waitFor(#"{"seq":9,"#))
        let like = try feedsync("like", "post4", "--user", "carol")
        #expect(like.status == 0, "status \(like.status) (a signal's number if it was killed by one), stderr: \(like.stderr)")
        #expect(follower.waitFor(#"{"seq":10,"kind":"liked","postID":"post4","userID":"carol","likeCount":1,"#))
        #expect(follower.interrupt() == 0)
        let lines = follower.stdout.split(separator: "\n")
        #expect(lines.count == 2)
    }

    @Test(arguments: TestBackend.allCases) func followWithALimitStopsByItself(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let follower = try RunningCLI(["events", "--follow", "--since", "9", "--limit", "1"], environment: environment())
        #expect(follower.waitFor("SEQ"))
        try feedsync("unlike", "post2", "--user", "alice")
        #expect(follower.waitForExit() == 0)
        #expect(follower.stdout.contains("unliked"))
    }

    @Test(arguments: TestBackend.allCases) func watchRedrawsWhenAnotherProcessLikes(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let watcher = try RunningCLI(["watch", "--user", "bob"], environment: environment())
        #expect(watcher.waitFor("post1"))
        try feedsync("like", "post5", "--user", "bob")
        #expect(watcher.waitFor("❤️"))
        #expect(watcher.interrupt() == 0)
        let lastFrame = try #require(watcher.stdout.components(separatedBy: "\n\n").last)
        #expect(lastFrame.split(separator: "\n").first { $0.hasPrefix("post5") }?.hasSuffix("❤️") == true)
    }

    @Test(arguments: TestBackend.allCases) func appShowsAnotherProcessesLikeAsItHappens(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let app = try RunningCLI(["app", "--user", "alice"], environment: environment())
        #expect(app.waitFor("Feed for alice"))
        try feedsync("like", "post1", "--user", "carol")
        #expect(app.waitFor("· carol liked post1 (1 like)"))
        app.send("feed")
        app.send("quit")
        #expect(app.waitForExit() == 0)
    }
}
