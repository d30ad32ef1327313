import FeedSync
import FeedTestSupport
import Foundation
import Testing

@testable import FeedCLI

/// `post delete` and `user delete`: text and JSON, idempotent, and the exit status of an unknown post.
extension EndToEndTests {
    @Test func postDeleteDeletesAnyPostOnceAndSaysSoAfterwards() throws {
        try demoDatabase()
        let deleted = try feedsync("post", "delete", "post2")
        #expect(deleted.status == 0, "\(deleted.stderr)")
        #expect(deleted.stdout.hasPrefix("Deleted post post2 (seq "))
        let again = try feedsync("post", "delete", "post2", "--json")
        #expect(again.status == 0)
        #expect(try json(again.stdout)["deleted"] as? Bool == false)
        #expect(try json(again.stdout)["seq"] is NSNull)
        let feed = try feedsync("feed", "--json")
        #expect(!feed.stdout.contains("\"post2\""))
        expectFailure(
            try feedsync("post", "delete", "nope"), status: 65, message: "Error: no post \"nope\". See 'feedsync feed' for ids.")
        #expect(try feedsync("check").status == 0)
    }

    @Test func userDeleteErasesTheUserAndTheLogNoLongerNamesThem() throws {
        try demoDatabase()
        let erased = try feedsync("user", "delete", "alice", "--json")
        #expect(erased.status == 0, "\(erased.stderr)")
        let result = try json(erased.stdout)
        #expect(result["deleted"] as? Bool == true)
        #expect(result["deletedPosts"] as? Int == 2)
        #expect(result["removedLikes"] as? Int == 1)
        let events = try feedsync("events", "--json")
        #expect(!events.stdout.contains("\"alice\""))
        let again = try feedsync("user", "delete", "alice")
        #expect(again.status == 0)
        #expect(again.stdout == "No user alice: nothing to erase.\n")
        #expect(try feedsync("check").status == 0)
    }

    @Test(arguments: TestBackend.allCases) func appLeavesTheDetailOfAPostDeletedMeanwhileForTheFeed(on backend: TestBackend) throws {
        guard try use(backend) else { return }
        try demoDatabase()
        let app = try RunningCLI(["app", "--user", "bob"], environment: environment())
        #expect(app.waitFor("Feed for bob"))
        app.send("open post3")
        #expect(app.waitFor("('like', 'unlike', 'toggle', 'back')"))
        #expect(try feedsync("post", "delete", "post3").status == 0)
        #expect(app.waitFor("· post3 was deleted"), "\(app.stdout)\n\(app.stderr)")
        app.send("like")
        app.send("quit")
        #expect(app.waitForExit() == 0)
        #expect(app.stderr.contains("Error: post \"post3\" was deleted. Back to the feed."))
        let lastFeed = try #require(app.stdout.components(separatedBy: "Feed for bob").last)
        #expect(!lastFeed.contains("post3"))
        #expect(lastFeed.contains("post1"))
        // The like went nowhere: the log's last event is the deletion.
        #expect(try feedsync("events", "--json").stdout.components(separatedBy: "\n").last { !$0.isEmpty }?.contains("postDeleted") == true)
    }
}
