import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// Blocks: a writer thread commits while a read holds its snapshot; waits on semaphores and joins it.
@Suite(.ownThreads) struct TransactionTests {
    @Test func likingAndUnlikingAreIdempotentAndKeepTheCount() throws {
        guard let db = try TestDatabase.make("tx_likes") else { return }
        try seedUsersAndPost(db.backend)
        let (user, post) = try db.backend.readOnce { tx in try tx.pg.keys(userID: "u2", postID: "p1") }
        try write(db.backend) { tx throws in
            #expect(try tx.pg.insertLike(userKey: user, postKey: post, at: testTime))
            #expect(try !tx.pg.insertLike(userKey: user, postKey: post, at: testTime))
            #expect(try tx.pg.likeCount(postKey: post) == 1)
            _ = try tx.pg.appendLikeChange(.liked, userID: "u2", postID: "p1", postKey: post, at: testTime)
        }
        try db.backend.read { tx throws in
            #expect(try tx.likeExists(userKey: user, postKey: post))
            #expect(try tx.likedPostIDs(userKey: user) == ["p1"])
            #expect(try tx.allLikes() == [LikePair(userID: "u2", postID: "p1")])
            #expect(try tx.post(id: "p1")?.likeCount == 1)
        }
        try write(db.backend) { tx throws in
            #expect(try tx.pg.deleteLike(userKey: user, postKey: post))
            #expect(try !tx.pg.deleteLike(userKey: user, postKey: post))
            #expect(try tx.pg.likeCount(postKey: post) == 0)
            _ = try tx.pg.appendLikeChange(.unliked, userID: "u2", postID: "p1", postKey: post, at: testTime)
        }
        // A toggle, twice: like, then unlike.
        for expected in [true, false] {
            try write(db.backend) { tx throws in
                let liked = try tx.likeExists(userKey: user, postKey: post)
                if liked {
                    _ = try tx.pg.deleteLike(userKey: user, postKey: post)
                } else {
                    _ = try tx.pg.insertLike(userKey: user, postKey: post, at: testTime)
                }
                _ = try tx.pg.appendLikeChange(liked ? .unliked : .liked, userID: "u2", postID: "p1", postKey: post, at: testTime)
            }
            #expect(try db.backend.readOnce { tx in try tx.likeExists(userKey: user, postKey: post) } == expected)
        }
        try db.backend.read { tx throws in
            #expect(try tx.events(after: 0, limit: nil).map(\.likeCount) == [1, 0, 1, 0])
            #expect(try tx.pg.likeCount(postKey: post) == 0)
            #expect(try tx.maintenance.invariantViolations().isEmpty)
        }
        #expect(throws: StorageError.userNotFound("nobody")) {
            try db.backend.readOnce { tx in try tx.pg.keys(userID: "nobody", postID: "p1") }
        }
        #expect(throws: StorageError.postNotFound("nothing")) {
            try db.backend.readOnce { tx in try tx.pg.keys(userID: "u1", postID: "nothing") }
        }
    }

    @Test func theFeedPageIsKeysetPaginatedNewestFirstWithTiesByInsertionOrder() throws {
        guard let db = try TestDatabase.make("tx_feed") else { return }
        // Seven posts, three of them at the same millisecond: the key breaks the tie, newest key first.
        let times: [Double] = [10, 20, 20, 20, 30, 5, 40]
        try write(db.backend) { tx throws in
            _ = try tx.insertUser(id: "author", name: "", at: testTime)
            _ = try tx.insertUser(id: "viewer", name: "", at: testTime)
            for (index, seconds) in times.enumerated() {
                _ = try tx.insertPost(id: "p\(index)", authorID: "author", body: "post \(index)", at: Date(timeIntervalSince1970: seconds))
            }
            let (viewer, liked) = try tx.pg.keys(userID: "viewer", postID: "p2")
            _ = try tx.pg.insertLike(userKey: viewer, postKey: liked, at: testTime)
        }
        let viewer = try db.backend.readOnce { tx in try tx.userKey(for: "viewer") }
        var pages: [[FeedRow]] = []
        var cursor: FeedCursor?
        repeat {
            let page = try db.backend.read { tx in
                try tx.feedPage(for: viewer.map(FeedViewer.key) ?? .anonymous, before: cursor, limit: 2).rows
            }
            pages.append(page)
            cursor = page.last.map { FeedCursor(after: $0.post) }
        } while pages.last?.count == 2
        let ids = pages.flatMap { $0.map(\.post.id) }
        #expect(ids == ["p6", "p4", "p3", "p2", "p1", "p0", "p5"])
        #expect(pages.flatMap { $0 }.filter(\.liked).map(\.post.id) == ["p2"])
        #expect(pages.map(\.count) == [2, 2, 2, 1])
        let all = try db.backend.readOnce { tx in try tx.feedPage(for: .anonymous, before: nil, limit: -1).rows }
        #expect(all.map(\.post.id) == ids)
        #expect(all.allSatisfy { !$0.liked })
        #expect(try db.backend.readOnce { tx in try tx.feedPage(for: .anonymous, before: nil, limit: 0).rows }.isEmpty)
        // The cursor is the SQLite backend's: created-at milliseconds and the post's sequence (its key).
        let p2 = try #require(all.first { $0.post.id == "p2" })
        #expect(FeedCursor(after: p2.post) == FeedCursor(createdAtMillis: 20_000, sequence: p2.post.sequence))
        let afterP2 = try db.backend.readOnce { tx in try tx.feedPage(for: .anonymous, before: FeedCursor(after: p2.post), limit: 10).rows }
        #expect(afterP2.map(\.post.id) == ["p1", "p0", "p5"])
    }

    @Test func theEventLogIsDenseAndTimesRoundTripToTheMillisecond() throws {
        guard let db = try TestDatabase.make("tx_events") else { return }
        let time = Date(timeIntervalSince1970: 1_700_000_000.123_456)
        let first = try write(db.backend) { tx throws in
            try tx.appendEvent(kind: .userCreated, userID: "u1", postID: nil, likeCount: nil, at: time)
        }
        #expect(first.seq == 1)
        #expect(first.at == Date(timeIntervalSince1970: 1_700_000_000.123))
        // A rolled-back append gives its seq back.
        struct Abandon: Error {}
        #expect(throws: Abandon.self) {
            try write(db.backend) { tx throws in
                _ = try tx.appendEvent(kind: .userCreated, userID: "u2", postID: nil, likeCount: nil, at: time)
                throw Abandon()
            }
        }
        let second = try write(db.backend) { tx throws in
            try tx.appendEvent(kind: .postCreated, userID: "u1", postID: "p1", likeCount: nil, at: time.addingTimeInterval(10))
        }
        #expect(second.seq == 2)
        try db.backend.read { tx throws in
            let events = try tx.events(after: 0, limit: nil)
            #expect(events == [first, second])
            #expect(try tx.events(after: 1, limit: 5) == [second])
            #expect(try tx.events(after: 0, limit: 1) == [first])
            #expect(try tx.lastSeq() == 2)
            #expect(try tx.maintenance.lastSeq(before: time.addingTimeInterval(1)) == 1)
            #expect(try tx.maintenance.lastSeq(before: time.addingTimeInterval(-1)) == nil)
        }
    }

    @Test func pruningKeepsTheNewestEventAndRecordsTheMark() throws {
        guard let db = try TestDatabase.make("tx_prune") else { return }
        try write(db.backend) { tx throws in
            for index in 1...5 {
                _ = try tx.insertUser(id: "u\(index)", name: "", at: testTime)
                _ = try tx.appendEvent(kind: .userCreated, userID: "u\(index)", postID: nil, likeCount: nil, at: testTime)
            }
        }
        #expect(try write(db.backend) { tx in try tx.maintenance.pruneEvents(through: 3) } == 3)
        #expect(try write(db.backend) { tx in try tx.maintenance.pruneEvents(through: 99) } == 1)
        try db.backend.read { tx throws in
            #expect(try tx.events(after: 0, limit: nil).map(\.seq) == [5])
            #expect(try tx.lastSeq() == 5)
            #expect(try tx.replayBaseline() == ReplayBaseline(prunedThrough: 4, bulkGeneration: 0, bulkThrough: 0))
            #expect(try tx.maintenance.invariantViolations().isEmpty)
        }
        let next = try write(db.backend) { tx in
            try tx.appendEvent(kind: .userCreated, userID: "u6", postID: nil, likeCount: nil, at: testTime)
        }
        #expect(next.seq == 6)
    }

    @Test func subscriberCursorsMoveOnlyForward() throws {
        guard let db = try TestDatabase.make("tx_cursors") else { return }
        try write(db.backend) { tx throws in
            #expect(try tx.subscriberPosition(for: "mail") == nil)
            #expect(try tx.advanceSubscriberCursor(5, for: "mail", at: testTime) == 5)
            #expect(try tx.advanceSubscriberCursor(3, for: "mail", at: testTime) == 5)
            #expect(try tx.advanceSubscriberCursor(7, for: "mail", at: testTime) == 7)
            try tx.markSubscriberRebuilt("search", through: 4, bulkGeneration: 2, at: testTime)
            #expect(try tx.subscriberPosition(for: "search") == SubscriberPosition(lastSeq: 4, bulkGeneration: 2))
            #expect(try tx.subscriberPosition(for: "mail") == SubscriberPosition(lastSeq: 7, bulkGeneration: 0))
            #expect(throws: StorageError.constraintViolation(field: "cursor", reason: "it is negative")) {
                try tx.advanceSubscriberCursor(-1, for: "mail", at: testTime)
            }
            #expect(throws: StorageError.constraintViolation(field: "bulk generation", reason: "it is negative")) {
                try tx.markSubscriberRebuilt("mail", through: 1, bulkGeneration: -1, at: testTime)
            }
        }
        #expect(try db.backend.readOnce { tx in try tx.subscriberCursors() } == ["mail": 7, "search": 4])
        try write(db.backend) { tx in try tx.removeSubscriberCursor(for: "mail") }
        #expect(try db.backend.readOnce { tx in try tx.subscriberCursors() } == ["search": 4])
    }

    @Test func aSavepointRollsBackOnlyItsOwnChanges() throws {
        guard let db = try TestDatabase.make("tx_savepoint") else { return }
        struct Undo: Error {}
        try write(db.backend) { tx throws in
            _ = try tx.insertUser(id: "kept", name: "", at: testTime)
            #expect(throws: Undo.self) {
                try tx.savepoint {
                    _ = try tx.insertUser(id: "undone", name: "", at: testTime)
                    throw Undo()
                }
            }
            // A failing statement inside a savepoint aborts only the savepoint.
            #expect(throws: StorageError.self) { try tx.savepoint { try tx.userStatements.fetch("SELECT * FROM no_such_table", []) } }
            // So does one the body caught: its changes cannot be kept without it.
            #expect(throws: StorageError.self) {
                try tx.savepoint {
                    _ = try tx.insertUser(id: "also-undone", name: "", at: testTime)
                    _ = try? tx.userStatements.fetch("SELECT * FROM no_such_table", [])
                }
            }
            let nested = try tx.savepoint {
                try tx.savepoint { try tx.insertUser(id: "nested", name: "", at: testTime).id }
            }
            #expect(nested == "nested")
        }
        #expect(try db.backend.readOnce { tx in try tx.allUsers().map(\.id) } == ["kept", "nested"])
    }

    @Test func aReadSeesOneSnapshot() throws {
        guard let db = try TestDatabase.make("tx_snapshot") else { return }
        let backend = db.backend
        let readStarted = DispatchSemaphore(value: 0)
        let writeDone = DispatchSemaphore(value: 0)
        let writer = spawn("writer") {
            guard waitFor(readStarted, "the read to start") else { return }
            do {
                try write(backend) { tx in _ = try tx.insertUser(id: "late", name: "", at: testTime) }
            } catch {
                Issue.record("write failed: \(error)")
            }
            writeDone.signal()
        }
        try backend.read { tx throws in
            #expect(try tx.maintenance.counts().users == 0)
            readStarted.signal()
            waitFor(writeDone, "the write to commit")
            #expect(try tx.maintenance.counts().users == 0)
            #expect(try tx.userKey(for: "late") == nil)
        }
        join([writer])
        #expect(try backend.readOnce { tx in try tx.maintenance.counts().users } == 1)
    }

    @Test func yourOwnStatementsBindEveryValueType() throws {
        guard let db = try TestDatabase.make("tx_values") else { return }
        let rows = try write(db.backend) { tx throws in
            try tx.userStatements.execute("CREATE TABLE mine (i bigint, r double precision, t text, b bytea, n int, f boolean, d numeric)")
            let changed = try tx.userStatements.execute(
                "INSERT INTO mine VALUES ($1, $2, $3, $4, $5, true, 12.5)",
                [.integer(-42), .real(2.5), .text("tab\there 'quoted' \"double\" \\ é"), .blob([0, 1, 254, 255]), .null])
            #expect(changed == 1)
            return try tx.userStatements.fetch(
                "SELECT i, r, t, b, n, f, d, 7::int2, count(*) OVER () FROM mine WHERE i = $1", [.integer(-42)])
        }
        #expect(
            rows == [
                [
                    .integer(-42), .real(2.5), .text("tab\there 'quoted' \"double\" \\ é"), .blob([0, 1, 254, 255]), .null, .integer(1),
                    .real(12.5), .integer(7), .integer(1),
                ]
            ])
    }

    @Test func parametersOfEveryKindAndSizeArriveAsSent() throws {
        guard let db = try TestDatabase.make("tx_parameters") else { return }
        let long = String(repeating: "long é 😀 ", count: 500)
        let sent: [DatabaseValue] = [
            .null, .text(""), .integer(Int64.min), .integer(Int64.max), .integer(0), .blob([]), .text(long), .real(-0.125),
            .blob(Array(repeating: 0, count: 3) + [7]), .text("x"), .null,
        ]
        let rows = try write(db.backend) { tx throws in
            try tx.userStatements.fetch(
                """
                SELECT $1::text, $2::text, $3::bigint, $4::bigint, $5::bigint, $6::bytea, $7::text, $8::float8, $9::bytea,
                       $10::text, $11::bigint
                """, sent)
        }
        #expect(rows == [sent])
    }

    @Test func countsAndInvariantsDescribeTheDatabase() throws {
        guard let db = try TestDatabase.make("tx_invariants") else { return }
        try seedUsersAndPost(db.backend, users: 3)
        try write(db.backend) { tx throws in
            let (user, post) = try tx.pg.keys(userID: "u3", postID: "p1")
            _ = try tx.pg.insertLike(userKey: user, postKey: post, at: testTime)
            _ = try tx.pg.appendLikeChange(.liked, userID: "u3", postID: "p1", postKey: post, at: testTime)
        }
        #expect(try db.backend.read { tx in try tx.maintenance.counts() } == FeedCounts(users: 3, posts: 1, likes: 1, events: 1))
        #expect(try db.backend.read { tx in try tx.maintenance.invariantViolations() }.isEmpty)
        // Break things behind the backend's back (as a superuser could): each rule names what it found.
        try db.admin("ALTER TABLE events DISABLE TRIGGER events_append_only")
        try db.admin("UPDATE events SET seq = 3")
        try db.admin("ALTER TABLE likes DISABLE TRIGGER likes_count_delete")
        try db.admin("DELETE FROM likes")
        let violations = try db.backend.read { tx in try tx.maintenance.invariantViolations() }
        #expect(
            violations == [
                InvariantViolation(rule: "integrity", detail: "trigger likes_count_delete is disabled"),
                InvariantViolation(rule: "integrity", detail: "the event-log head is 1 but the newest seq is 3"),
                InvariantViolation(rule: "like-count", detail: "post \"p1\" has like_count 1 but 0 like rows"),
                InvariantViolation(rule: "like-count", detail: "user \"u3\" has like_count 1 but 0 like rows"),
                InvariantViolation(rule: "log-replay", detail: "the log has like u3→p1 but the likes table does not"),
            ])
    }
}
