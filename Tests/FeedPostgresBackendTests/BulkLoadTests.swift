import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

// Blocks: long synchronous PostgreSQL work: a COPY bulk load of 25,000 rows and its VACUUM.
@Suite(.ownThreads) struct BulkLoadTests {
    @Test func aBulkLoadCopiesRowsKeepsCountsAndRecordsTheBaseline() throws {
        guard let db = try TestDatabase.make("bulk_copy") else { return }
        let backend = db.backend
        // One event before the load: the baseline is the log's last seq at the load. It names a user the load
        // creates (`check` finds an event naming a user who does not exist).
        try write(backend) { tx in _ = try tx.appendEvent(kind: .userCreated, userID: "user0", postID: nil, likeCount: nil, at: testTime) }
        let userCount = 3000
        let postCount = 2000
        var expectedLikes = Set<[Int64]>()
        let body = "tab\there, newline\nthere, backslash \\ and é"
        let (userKeys, postKeys) = try backend.bulkLoad { loader -> ([Int64], [Int64]) in
            #expect(backend.isWritingOnCurrentThread)
            var users: [Int64] = []
            var posts: [Int64] = []
            for index in 0..<userCount {
                users.append(try loader.addUser(id: "user\(index)", name: "Name \(index)", createdAt: testTime))
            }
            for index in 0..<postCount {
                posts.append(
                    try loader.addPost(
                        id: "post\(index)", authorID: "user\(index % userCount)", body: index == 0 ? body : "post \(index)",
                        createdAt: Date(timeIntervalSince1970: Double(index))))
            }
            var generator = SystemRandomNumberGenerator()
            for _ in 0..<20_000 {
                let user = users[Int.random(in: 0..<40, using: &generator)]
                let post = posts[Int.random(in: 0..<300, using: &generator)]
                let added = try loader.addLikeIfAbsent(userKey: user, postKey: post, createdAtMillis: 1000)
                #expect(added == expectedLikes.insert([user, post]).inserted)
            }
            return (users, posts)
        }
        // The loaded tables were vacuumed after the commit: their pages are marked all-visible (ANALYZE alone leaves
        // `relallvisible` at 0 for rows just copied; autovacuum's first look is a minute away). Not necessarily every
        // page: VACUUM passes over a page another process has pinned at that moment (the checkpointer, under CI's
        // load: 61 of 62 once), so at least half.
        let visibility = try db.admin(
            "SELECT relname::text, relpages, relallvisible FROM pg_class WHERE relname IN ('users', 'posts', 'likes') ORDER BY relname")
        #expect(visibility.count == 3)
        for row in visibility {
            guard case .integer(let pages) = row[1], case .integer(let visible) = row[2] else {
                Issue.record("unexpected row \(row)")
                continue
            }
            #expect(pages > 0 && visible > 0 && visible * 2 >= pages, "\(row)")
        }
        #expect(userKeys == Array(1...Int64(userCount)))
        #expect(postKeys == Array(1...Int64(postCount)))
        try backend.read { tx throws in
            #expect(try tx.maintenance.counts() == FeedCounts(users: userCount, posts: postCount, likes: expectedLikes.count, events: 1))
            #expect(try tx.maintenance.invariantViolations().isEmpty)
            #expect(try tx.replayBaseline() == ReplayBaseline(prunedThrough: 0, bulkGeneration: 1, bulkThrough: 1))
            #expect(try tx.post(id: "post0")?.body == body)
            let liked = Dictionary(grouping: expectedLikes, by: { $0[1] }).mapValues(\.count)
            for (post, count) in liked.prefix(20) { #expect(try tx.pg.likeCount(postKey: post) == count) }
        }
        // Keys go on after the loaded ones, and the like-count trigger is back.
        let (user, post) = try write(backend) { tx -> (Int64, Int64) in
            _ = try tx.insertUser(id: "after", name: "", at: testTime)
            let created = try tx.insertPost(id: "after-post", authorID: "after", body: "x", at: testTime)
            let keys = try tx.pg.keys(userID: "after", postID: "after-post")
            #expect(created.sequence == Int64(postCount) + 1)
            _ = try tx.pg.insertLike(userKey: keys.user, postKey: keys.post, at: testTime)
            return keys
        }
        #expect(user == Int64(userCount) + 1)
        #expect(try backend.readOnce { tx in try tx.pg.likeCount(postKey: post) } == 1)
    }

    @Test func aSecondLoadSkipsLikesThatExistAlready() throws {
        guard let db = try TestDatabase.make("bulk_again") else { return }
        let backend = db.backend
        try seedUsersAndPost(backend)
        let (user, post) = try backend.readOnce { tx in try tx.pg.keys(userID: "u2", postID: "p1") }
        try write(backend) { tx in _ = try tx.pg.insertLike(userKey: user, postKey: post, at: testTime) }
        let added = try backend.bulkLoad { loader -> [Bool] in
            let newUser = try loader.addUser(id: "u3", name: "", createdAt: testTime)
            return [
                try loader.addLikeIfAbsent(userKey: user, postKey: post, createdAtMillis: 0),
                try loader.addLikeIfAbsent(userKey: newUser, postKey: post, createdAtMillis: 0),
                try loader.addLikeIfAbsent(userKey: newUser, postKey: post, createdAtMillis: 0),
                try loader.addLikeIfAbsent(userKey: 1, postKey: post, createdAtMillis: 0),
            ]
        }
        #expect(added == [false, true, false, true])
        try backend.read { tx throws in
            #expect(try tx.pg.likeCount(postKey: post) == 3)
            #expect(try tx.maintenance.counts().likes == 3)
            #expect(try tx.maintenance.invariantViolations().isEmpty)
        }
    }

    @Test func aLoadWithoutLikesLeavesTheBaseline() throws {
        guard let db = try TestDatabase.make("bulk_nolikes") else { return }
        try db.backend.bulkLoad { loader in _ = try loader.addUser(id: "solo", name: "", createdAt: testTime) }
        #expect(
            try db.backend.readOnce { tx in try tx.replayBaseline() } == ReplayBaseline(prunedThrough: 0, bulkGeneration: 0, bulkThrough: 0)
        )
    }

    @Test func refusedRowsNameTheIdAndKeepNothing() throws {
        guard let db = try TestDatabase.make("bulk_refused") else { return }
        let backend = db.backend
        try seedUsersAndPost(backend)
        #expect(throws: StorageError.userAlreadyExists("u1")) {
            try backend.bulkLoad { loader in
                _ = try loader.addUser(id: "fresh", name: "", createdAt: testTime)
                _ = try loader.addUser(id: "u1", name: "", createdAt: testTime)
            }
        }
        #expect(throws: StorageError.userAlreadyExists("twice")) {
            try backend.bulkLoad { loader in
                _ = try loader.addUser(id: "twice", name: "", createdAt: testTime)
                _ = try loader.addUser(id: "twice", name: "", createdAt: testTime)
            }
        }
        #expect(throws: StorageError.postAlreadyExists("p1")) {
            try backend.bulkLoad { loader in _ = try loader.addPost(id: "p1", authorID: "u1", body: "x", createdAt: testTime) }
        }
        #expect(throws: StorageError.userNotFound("ghost")) {
            try backend.bulkLoad { loader in _ = try loader.addPost(id: "p2", authorID: "ghost", body: "x", createdAt: testTime) }
        }
        #expect(throws: StorageError.constraintViolation(field: "post text", reason: "it is empty")) {
            try backend.bulkLoad { loader in _ = try loader.addPost(id: "p3", authorID: "u1", body: "", createdAt: testTime) }
        }
        try backend.read { tx throws in
            #expect(try tx.maintenance.counts() == FeedCounts(users: 2, posts: 1, likes: 0, events: 0))
            #expect(try tx.maintenance.invariantViolations().isEmpty)
        }
        // The trigger came back with the rollback.
        let (user, post) = try backend.readOnce { tx in try tx.pg.keys(userID: "u2", postID: "p1") }
        try write(backend) { tx in _ = try tx.pg.insertLike(userKey: user, postKey: post, at: testTime) }
        #expect(try backend.readOnce { tx in try tx.pg.likeCount(postKey: post) } == 1)
    }
}
