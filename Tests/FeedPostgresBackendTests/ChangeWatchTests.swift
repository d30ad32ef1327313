import FeedCore
import FeedPostgresBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// Blocks: waits on PostgreSQL change watches and joins waiter threads.
@Suite(.ownThreads) struct ChangeWatchTests {
    @Test func pollReportsAMovedLogHead() throws {
        guard let db = try TestDatabase.make("watch_poll") else { return }
        let watch = try db.backend.makeChangeWatch(watchFiles: true)
        defer { watch.close() }
        #expect(try watch.poll())
        #expect(try !watch.poll())
        try write(db.backend) { tx in _ = try tx.insertUser(id: "quiet", name: "", at: testTime) }
        #expect(try !watch.poll())
        try write(db.backend) { tx in _ = try tx.appendEvent(kind: .userCreated, userID: "u1", postID: nil, likeCount: nil, at: testTime) }
        #expect(try watch.poll())
        #expect(try !watch.poll())
    }

    @Test func waitEndsOnWakeOrTimeout() throws {
        guard let db = try TestDatabase.make("watch_wait") else { return }
        let watch = try db.backend.makeChangeWatch(watchFiles: false)
        defer { watch.close() }
        #expect(watch.wait(timeout: .milliseconds(20)) == .timedOut)
        watch.wake()
        #expect(watch.wait(timeout: stallLimit) == .woken)
        let waiting = DispatchSemaphore(value: 0)
        let result = Shared<FeedChangeWake?>(nil)
        let waiter = spawn("waiter") {
            waiting.signal()
            result.update { $0 = watch.wait(timeout: stallLimit) }
        }
        waitFor(waiting, "the waiter")
        watch.wake()
        join([waiter])
        #expect(result.current == .woken)
    }

    @Test func aLostWatchConnectionFailsOnePollAndTheNextReconnects() throws {
        guard let db = try TestDatabase.make("watch_lost") else { return }
        let watch = try db.backend.makeChangeWatch(watchFiles: false)
        defer { watch.close() }
        #expect(try watch.poll())
        try terminateFeedSyncSessions(db)
        let error = try #require(throws: StorageError.self) { try watch.poll() }
        guard case .connectionLost = error else {
            Issue.record("unexpected \(error)")
            return
        }
        #expect(try !watch.poll())
        try write(db.backend) { tx in _ = try tx.appendEvent(kind: .userCreated, userID: "u1", postID: nil, likeCount: nil, at: testTime) }
        #expect(try watch.poll())
    }
}
