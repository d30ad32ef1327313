import FeedCore
import FeedSQLiteBackend
import FeedTestSupport
import FeedTestThreads
import Foundation
import Glibc
import Testing

/// `FeedStore.tryHold(name:)`: an exclusive name (a durable subscriber's) held by one holder at a time, and free
/// again the moment it is released.
// Blocks: waits (`waitpid`) for a forked child killed with SIGKILL.
@Suite(.ownThreads) struct NameLeaseTests {
    /// Runs `body` with two stores open on one new database file (as two processes would have), then closes them.
    private func withTwoStores(_ body: (_ store: FeedStore, _ other: FeedStore) throws -> Void) throws {
        let dir = TemporaryDirectory()
        let store = try FeedStore(path: dir.file("feed.sqlite"))
        let other = try FeedStore(path: dir.file("feed.sqlite"))
        defer {
            store.close()
            other.close()
        }
        try body(store, other)
    }

    @Test func aNameIsHeldOnceAndFreeAfterRelease() throws {
        try withTwoStores { store, other in
            let lease = try #require(try store.tryHold(name: "mailer"))
            #expect(try other.tryHold(name: "mailer") == nil)
            #expect(try store.tryHold(name: "mailer") == nil, "a second holder in the same store is refused too")
            let unrelated = try #require(try other.tryHold(name: "digest"))
            unrelated.release()
            lease.release()
            let again = try #require(try other.tryHold(name: "mailer"))
            again.release()
        }
    }

    /// A child forked by this process shares the lease's open file description until it reaches `exec` (or, here,
    /// never does): releasing must free the name all the same, not when the last copy of the descriptor closes.
    @Test func aReleasedNameIsFreeWhileAForkedChildStillSharesTheDescriptor() throws {
        try withTwoStores { store, other in
            let lease = try #require(try store.tryHold(name: "mailer"))
            let child = fork()
            if child == 0 {
                // Only async-signal-safe calls in the child of a multithreaded process: wait to be killed.
                while true { pause() }
            }
            try #require(child > 0, "fork failed: errno \(errno)")
            defer {
                kill(child, SIGKILL)
                var status: Int32 = 0
                waitpid(child, &status, 0)
            }
            lease.release()
            let again = try other.tryHold(name: "mailer")
            #expect(again != nil, "the name stayed taken while the forked child held a copy of the descriptor")
            again?.release()
        }
    }
}
