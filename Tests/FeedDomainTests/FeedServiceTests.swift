import FeedSync
import FeedCore
import FeedDependencies
import FeedDomain
import FeedPublishers
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// Blocks: waits for delivery (`waitForDelivery`) and on a semaphore holding a slow sink.
@Suite(.ownThreads) struct FeedServiceTests {
    @Test(arguments: TestBackend.allCases) func likeChangesOnceAndIsIdempotent(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let first = try service.like(userID: "user2", postID: "post2")
        #expect(first.changed && first.liked && first.likeCount == 1)
        let seq = try #require(first.seq)
        let again = try service.like(userID: "user2", postID: "post2")
        #expect(again == LikeResult(postID: "post2", userID: "user2", liked: true, likeCount: 1, changed: false, seq: nil))
        #expect(try service.events(after: seq).isEmpty)
        let unliked = try service.unlike(userID: "user2", postID: "post2")
        #expect(unliked.changed && !unliked.liked && unliked.likeCount == 0 && unliked.seq == seq + 1)
        let unlikedAgain = try service.unlike(userID: "user2", postID: "post2")
        #expect(!unlikedAgain.changed && unlikedAgain.seq == nil && unlikedAgain.likeCount == 0)
        #expect(try service.events(after: seq).count == 1)
    }

    @Test(arguments: TestBackend.allCases) func toggleAlternates(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        #expect(try service.toggle(userID: "user1", postID: "post1").liked)
        #expect(try !service.toggle(userID: "user1", postID: "post1").liked)
        #expect(try service.toggle(userID: "user1", postID: "post1").liked)
        #expect(try service.check().isEmpty)
    }

    @Test(arguments: TestBackend.allCases) func changingCommandWritesLikeCountAndExactlyOneEvent(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let before = try service.status()
        let result = try service.like(userID: "user3", postID: "post1")
        let after = try service.status()
        #expect(after.likes == before.likes + 1)
        #expect(after.events == before.events + 1)
        #expect(after.lastSeq == result.seq)
        let event = try #require(try service.events(after: before.lastSeq).first)
        #expect(event.kind == .liked && event.userID == "user3" && event.postID == "post1" && event.likeCount == 1)
    }

    @Test(arguments: TestBackend.allCases) func unknownAndInvalidIdsAreTypedErrorsAndWriteNothing(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let before = try service.status()
        #expect(throws: FeedError.postNotFound("post9")) { try service.like(userID: "user1", postID: "post9") }
        #expect(throws: FeedError.userNotFound("nobody")) { try service.like(userID: "nobody", postID: "post1") }
        let invalid = try #require(throws: FeedError.self) { try service.like(userID: "user1", postID: "") }
        #expect(invalid.category == .data)
        #expect("\(invalid)".contains("post id"))
        let injection = try #require(throws: FeedError.self) {
            try service.createPost(id: "x'; DROP TABLE posts;--", authorID: "user1", body: "b")
        }
        guard case .invalidValue(let field, _, _) = injection else { Issue.record("\(injection)"); return }
        #expect(field == "post id")
        #expect(throws: FeedError.userNotFound("ghost")) { try service.createPost(id: "p", authorID: "ghost", body: "b") }
        #expect(throws: FeedError.postAlreadyExists("post1")) { try service.createPost(id: "post1", authorID: "user1", body: "b") }
        #expect(throws: FeedError.self) { try service.createPost(id: "p", authorID: "user1", body: "") }
        #expect(throws: FeedError.userAlreadyExists("user1")) { try service.createUser(id: "user1") }
        #expect(try service.status() == before)
    }

    @Test func errorsNeverEchoMoreThanNeeded() {
        let huge = String(repeating: "a", count: 1_000_000)
        let text = "\(FeedError.postNotFound(huge))"
        #expect(text.count < 100)
        #expect(!"\(FeedError.postNotFound("evil\u{1B}[31m"))".contains("\u{1B}"))
    }

    /// With one key cached the other is looked up alone (`postKey(for:)` / `userKey(for:)`): found, or the typed
    /// error for the unknown one, and nothing written.
    @Test(arguments: TestBackend.allCases) func aKeyNotCachedIsLookedUpAloneAndAnUnknownOneIsATypedError(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        _ = try service.like(userID: "user1", postID: "post1")  // both keys cached now
        let before = try service.status()
        #expect(throws: FeedError.postNotFound("post9")) { try service.like(userID: "user1", postID: "post9") }
        #expect(throws: FeedError.userNotFound("nobody")) { try service.toggle(userID: "nobody", postID: "post1") }
        #expect(try service.status() == before)
        // The cached user with a post not cached yet, and the reverse: both found.
        #expect(try service.like(userID: "user1", postID: "post2").changed)
        #expect(try service.like(userID: "user2", postID: "post1").likeCount == 2)
        #expect(try service.likedPostIDs(userID: "user1") == ["post1", "post2"])
        #expect(try service.check().isEmpty)
    }

    @Test(arguments: TestBackend.allCases) func rolledBackBatchEmitsNothing(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        let bridge = EventBridge()
        guard let service = try makeService(in: dir, on: backend, bridge: bridge) else { return }
        let recorder = Recorder(bridge.changes)
        let before = try service.status()
        #expect(throws: FeedError.postNotFound("post404")) {
            try service.perform([
                LikeCommand(.like, userID: "user1", postID: "post1"),
                LikeCommand(.like, userID: "user1", postID: "post404"),
            ])
        }
        #expect(try service.status() == before)
        // The next commit still gets the next seq and goes out alone.
        let result = try service.like(userID: "user1", postID: "post1")
        #expect(service.waitForDelivery(through: try #require(result.seq)))
        #expect(recorder.values.map(\.seq) == [try #require(result.seq)])
        #expect(result.seq == before.lastSeq + 1)
    }

    @Test(arguments: TestBackend.allCases) func eventsReachSubscribersInSeqOrderAfterTheirCommit(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        let bridge = EventBridge()
        guard let service = try makeService(in: dir, on: backend, bridge: bridge) else { return }
        let likes = Recorder(bridge.likePublisher)
        let changes = Recorder(bridge.changes)
        let result = try service.like(userID: "user2", postID: "post2")
        #expect(service.waitForDelivery(through: try #require(result.seq)))
        #expect(likes.values == [.liked(postID: "post2")])
        #expect(changes.values.last?.seq == result.seq)
        let unliked = try service.unlike(userID: "user2", postID: "post2")
        #expect(service.waitForDelivery(through: try #require(unliked.seq)))
        #expect(likes.values == [.liked(postID: "post2"), .unliked(postID: "post2")])
        #expect(bridge.lastDeliveredSeq == changes.values.last?.seq)
    }

    /// A sink that is slow (here: blocked until the test lets it go) delays only deliveries: commands go on
    /// returning at their commit, sync and async alike, and the sink then sees every event in order.
    @Test(arguments: TestBackend.allCases) func aSlowSinkDelaysOnlyDeliveries(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        let bridge = EventBridge()
        guard let service = try makeService(in: dir, on: backend, bridge: bridge) else { return }
        let release = DispatchSemaphore(value: 0)
        let seen = LockedLog<Int64>()
        let slow = bridge.changes.sink { event in
            if seen.values.isEmpty { release.wait() }
            seen.append(event.seq)
        }
        defer { slow.cancel() }
        let first = try await service.like(userID: "user1", postID: "post1")
        let second = try await service.like(userID: "user1", postID: "post2")
        let third = try await service.toggle(userID: "user1", postID: "post3")
        #expect(seen.values.isEmpty, "the sink is still blocked in the first event")
        #expect(bridge.lastDeliveredSeq < (first.seq ?? 0))
        release.signal()
        let last = try #require(third.seq)
        #expect(await service.waitForDelivery(through: last))
        #expect(seen.values == [first.seq, second.seq, third.seq].compactMap { $0 })
    }

    @Test(arguments: TestBackend.allCases) func bridgeLoggerRunsOncePerLikeEvent(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        let log = LockedLog<LikeEvent>()
        let bridge = EventBridge { log.append($0) }
        guard let service = try makeService(in: dir, on: backend, bridge: bridge) else { return }
        let result = try service.like(userID: "user1", postID: "post3")
        _ = try service.like(userID: "user1", postID: "post3")
        #expect(service.waitForDelivery(through: try #require(result.seq)))
        #expect(log.values == [.liked(postID: "post3")])
    }

    @Test(arguments: TestBackend.allCases) func manyConcurrentCommandsKeepCountsAndLogExact(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        let bridge = EventBridge()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try withDependencies {
            $0.date = .constant(Date(timeIntervalSince1970: 1_700_000_000))
        } operation: {
            let service = try FeedService(location: location, bridge: bridge)
            for u in 1...10 { try service.createUser(id: "user\(u)") }
            for p in 1...20 { try service.createPost(id: "post\(p)", authorID: "user1", body: "b") }
            return service
        }
        service.settle()
        let delivered = Recorder(bridge.changes)
        let baseline = try await service.status().lastSeq
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var state = UInt64(worker + 1) &* 0x9E37_79B9_7F4A_7C15
                    for _ in 0..<125 {
                        state = state &* 6364136223846793005 &+ 1442695040888963407
                        let user = "user\(1 + Int((state >> 33) % 10))"
                        let post = "post\(1 + Int((state >> 40) % 20))"
                        switch (state >> 50) % 3 {
                        case 0: _ = try service.like(userID: user, postID: post)
                        case 1: _ = try service.unlike(userID: user, postID: post)
                        default: _ = try service.toggle(userID: user, postID: post)
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await service.check().isEmpty)
        // Replaying the log from the start rebuilds exactly the likes table.
        var replayed = Set<LikePair>()
        for event in try await service.events(after: 0) {
            switch event.kind {
            case .liked: replayed.insert(LikePair(userID: event.userID, postID: event.postID!))
            case .unliked: replayed.remove(LikePair(userID: event.userID, postID: event.postID!))
            default: break
            }
        }
        let actual = try service.backend.read { tx in try tx.allLikes() }
        #expect(replayed == actual)
        // Subscribers saw every change once, in seq order, with no gap.
        let last = try await service.status().lastSeq
        #expect(await service.waitForDelivery(through: last))
        let seqs = delivered.values.map(\.seq)
        #expect(last > baseline)
        #expect(seqs == Array((baseline + 1)...last))
    }

    @Test(arguments: TestBackend.allCases) func feedPagesWithKeysetCursorAndLimits(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        _ = try service.like(userID: "user2", postID: "post1")
        let first = try service.feedPage(viewerID: "user2", limit: 2)
        #expect(first.rows.map(\.post.id) == ["post3", "post2"])
        let second = try service.feedPage(viewerID: "user2", before: first.nextCursor, limit: 2)
        #expect(second.rows.map(\.post.id) == ["post1"])
        #expect(second.nextCursor == nil)
        #expect(second.likedPostIDs == ["post1"])
        // A viewer this service has not seen yet, past the end: an empty page, not an unknown user.
        #expect(try service.feedPage(viewerID: "user3", before: FeedCursor(after: second.rows[0].post), limit: 2).rows.isEmpty)
        #expect(throws: FeedError.invalidLimit(0, maximum: FeedService.maximumPageSize)) { try service.feedPage(viewerID: nil, limit: 0) }
        #expect(throws: FeedError.invalidLimit(-1, maximum: FeedService.maximumPageSize)) { try service.feedPage(viewerID: nil, limit: -1) }
        #expect(throws: FeedError.userNotFound("nobody")) { try service.feedPage(viewerID: "nobody", limit: 5) }
    }

    @Test(arguments: TestBackend.allCases) func aViewerNotSeenBeforeIsLookedUpWithThePage(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let writer = try makeService(at: location)
        _ = try writer.like(userID: "user2", postID: "post2")
        let everything = try writer.feedPage(viewerID: nil, limit: 3)
        let pastTheEnd = FeedCursor(after: try #require(everything.rows.last).post)
        // A fresh service knows no user's key: its first page for a viewer looks the viewer up (on PostgreSQL inside
        // the page's own statement), the next one uses the cached key; both give the same page.
        let fresh = try FeedService(location: location)
        let first = try fresh.feedPage(viewerID: "user2", limit: 2)
        #expect(first.rows.map(\.post.id) == ["post3", "post2"])
        #expect(first.likedPostIDs == ["post2"])
        #expect(try fresh.feedPage(viewerID: "user2", limit: 2) == first)
        // A known viewer past the last post: an empty page, not an unknown user.
        let other = try FeedService(location: location)
        let end = try other.feedPage(viewerID: "user3", before: pastTheEnd, limit: 5)
        #expect(end.rows.isEmpty)
        #expect(end.nextCursor == nil)
        #expect(try other.feedPage(viewerID: "user3", before: pastTheEnd, limit: 5) == end)
        #expect(throws: FeedError.userNotFound("ghost")) {
            try FeedService(location: location).feedPage(viewerID: "ghost", before: pastTheEnd, limit: 5)
        }
        #expect(try FeedService(location: location).feedPage(viewerID: nil, limit: 5).likedPostIDs.isEmpty)
    }

    @Test(arguments: TestBackend.allCases) func generatedPostIdsComeFromTheUUIDDependency(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try withDependencies {
            $0.uuid = .incrementing
            $0.date = .constant(Date(timeIntervalSince1970: 0))
        } operation: {
            try FeedService(location: location)
        }
        try service.createUser(id: "u")
        let a = try service.createPost(authorID: "u", body: "one")
        let b = try service.createPost(authorID: "u", body: "two")
        #expect(a.id == "post-00000000-0000-0000-0000-000000000000")
        #expect(b.id == "post-00000000-0000-0000-0000-000000000001")
        #expect(a.createdAt == Date(timeIntervalSince1970: 0))
    }
}

/// A thread-safe append-only list that can be waited on.
final class LockedLog<Value: Sendable>: @unchecked Sendable {
    // `@unchecked Sendable`: `storage` is only touched while `condition` is locked.
    private let condition = NSCondition()
    private var storage: [Value] = []

    func append(_ value: Value) {
        condition.lock()
        storage.append(value)
        condition.broadcast()
        condition.unlock()
    }

    var values: [Value] {
        condition.lock()
        defer { condition.unlock() }
        return storage
    }

    /// Waits until `predicate` holds for the values, at most `seconds`; returns whether it held.
    func wait(seconds: Double = 10, until predicate: ([Value]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(storage) {
            if !condition.wait(until: deadline) { return predicate(storage) }
        }
        return true
    }
}
