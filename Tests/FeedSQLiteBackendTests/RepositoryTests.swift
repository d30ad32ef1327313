import FeedCore
import FeedSQLite
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import Testing

@Suite struct RepositoryTests {
    let now = Date(timeIntervalSince1970: 1_700_000_000)

    func seeded() throws -> FeedStore {
        let store = try FeedStore.inMemory()
        try store.write { db throws in
            try UserRepository(db).insert(id: "user1", name: "Ada", at: now)
            try UserRepository(db).insert(id: "user2", name: "Grace", at: now)
            for i in 1...3 {
                try PostRepository(db).insert(id: "post\(i)", authorID: "user1", body: "body \(i)", at: now.addingTimeInterval(Double(i)))
            }
        }
        return store
    }

    @Test func likeCountFollowsLikeRowsThroughTheRepository() throws {
        let store = try seeded()
        try store.write { db throws in
            let likes = LikeRepository(db)
            let a = try likes.keys(userID: "user1", postID: "post2")
            let b = try likes.keys(userID: "user2", postID: "post2")
            #expect(try likes.insert(userKey: a.user, postKey: a.post, at: now))
            #expect(try !likes.insert(userKey: a.user, postKey: a.post, at: now))
            #expect(try likes.insert(userKey: b.user, postKey: b.post, at: now))
            #expect(try PostRepository(db).likeCount(postKey: a.post) == 2)
            #expect(try likes.delete(userKey: a.user, postKey: a.post))
            #expect(try !likes.delete(userKey: a.user, postKey: a.post))
            #expect(try PostRepository(db).likeCount(postKey: a.post) == 1)
            // Only the post liked moved.
            #expect(try PostRepository(db).likeCount(postKey: try likes.keys(userID: "user1", postID: "post1").post) == 0)
            #expect(try PostRepository(db).likeCount(postKey: try likes.keys(userID: "user1", postID: "post3").post) == 0)
        }
        #expect(try store.read { db in try db.fetchInt64(Self.miscountedPosts) } == 0)
    }

    /// Posts whose like count differs from their like rows (these tests write likes without events, so the
    /// checker's log rules do not apply).
    static let miscountedPosts =
        "SELECT count(*) FROM posts p WHERE like_count <> (SELECT count(*) FROM likes l WHERE l.post_key = p.post_key)"

    /// Schema version 3 counts likes in `LikeRepository`; the only trigger left is the event log's append-only guard.
    @Test func theOnlyTriggerIsTheEventLogGuard() throws {
        let store = try FeedStore.inMemory()
        let names = try store.read { db in
            try db.fetchAll("SELECT name FROM sqlite_schema WHERE type = 'trigger' ORDER BY name", decode: { $0.string(at: 0) })
        }
        #expect(names == ["events_append_only"])
    }

    /// A database made at schema version 2 (like-count triggers) with likes in it migrates to version 3: the
    /// triggers go, the counts stay exact, and likes added after the migration are counted once (not twice).
    @Test func aVersion2DatabaseMigratesAndCountsLikesOnce() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("v2.sqlite")
        let v2 = Migrator(migrations: Array(Migrator.embedded.migrations.prefix(2)))
        do {
            let store = try FeedStore(path: path, migrator: v2)
            try store.write { db throws in
                try UserRepository(db).insert(id: "user1", name: "", at: now)
                // Rows go in as version 2's code wrote them (today's repositories use later tables).
                try db.run("INSERT INTO posts (id, author_id, body, created_at) VALUES ('post1', 'user1', 'b', 0)")
                let keys = try LikeRepository(db).keys(userID: "user1", postID: "post1")
                // Version 2's trigger counts this insert (the repository's own UPDATE is version 3's and would count
                // it again, so the row goes in as version 2's code wrote it).
                try db.run("INSERT INTO likes (user_key, post_key, created_at) VALUES (?, ?, 0)", keys.user, keys.post)
            }
            #expect(try store.read { db in try db.fetchInt64("SELECT like_count FROM posts") } == 1)
            store.close()
        }
        let store = try FeedStore(path: path)
        try store.read { db throws in
            #expect(try db.fetchInt64("PRAGMA user_version") == Int64(Migrator.embedded.latestVersion))
            #expect(try db.fetchInt64("SELECT count(*) FROM sqlite_schema WHERE name LIKE 'likes_count_%'") == 0)
            #expect(try db.fetchInt64("SELECT count(*) FROM sqlite_schema WHERE tbl_name = 'likes' AND type = 'index'") == 0)
            #expect(try db.fetchInt64("SELECT like_count FROM posts") == 1)
        }
        try store.write { db throws in
            let likes = LikeRepository(db)
            _ = try UserRepository(db).insert(id: "user2", name: "", at: now)
            let keys = try likes.keys(userID: "user2", postID: "post1")
            #expect(try likes.insert(userKey: keys.user, postKey: keys.post, at: now))
        }
        #expect(try store.read { db in try db.fetchInt64("SELECT like_count FROM posts") } == 2)
        #expect(try store.read { db in try db.fetchInt64(Self.miscountedPosts) } == 0)
    }

    @Test func eventLogIsAppendOnlyAndSeqsIncrease() throws {
        let store = try seeded()
        let events = try store.write { db throws in
            try (1...3).map { i in
                try EventLog(db).append(kind: .liked, userID: "user1", postID: "post\(i)", likeCount: 1, at: now)
            }
        }
        #expect(events.map(\.seq) == [1, 2, 3])
        #expect(throws: StorageError.self) {
            try store.write { db in try db.run("UPDATE events SET kind = 'unliked' WHERE seq = 1") }
        }
        let read = try store.read { db in try EventLog(db).events(after: 1) }
        #expect(read.map(\.seq) == [2, 3])
        #expect(read.first?.postID == "post2")
        #expect(try store.read { db in try EventLog(db).lastSeq() } == 3)
    }

    @Test(arguments: [
        ("", "user id"), ("has space", "user id"), ("semi;colon", "user id"), (String(repeating: "x", count: 65), "user id"),
        ("quote'--", "user id"), ("nul\u{0}", "user id"),
    ])
    func invalidUserIDsAreTypedErrorsAndWriteNothing(id: String, field: String) throws {
        let store = try FeedStore.inMemory()
        let error = try #require(throws: StorageError.self) {
            try store.write { db in try UserRepository(db).insert(id: id, name: "", at: now) }
        }
        guard case .constraintViolation(let reported, _) = error else { Issue.record("unexpected \(error)"); return }
        #expect(reported == field)
        #expect(try store.read { db in try UserRepository(db).count() } == 0)
    }

    @Test func duplicateAndDanglingRowsBecomeTypedErrors() throws {
        let store = try seeded()
        #expect(throws: StorageError.userAlreadyExists("user1")) {
            try store.write { db in try UserRepository(db).insert(id: "user1", name: "", at: now) }
        }
        #expect(throws: StorageError.postAlreadyExists("post1")) {
            try store.write { db in try PostRepository(db).insert(id: "post1", authorID: "user1", body: "x", at: now) }
        }
        #expect(throws: StorageError.userNotFound("ghost")) {
            try store.write { db in try PostRepository(db).insert(id: "post9", authorID: "ghost", body: "x", at: now) }
        }
        #expect(throws: StorageError.postNotFound("post9")) {
            try store.write { db in _ = try LikeRepository(db).keys(userID: "user1", postID: "post9") }
        }
        #expect(throws: StorageError.userNotFound("user9")) {
            try store.write { db in _ = try LikeRepository(db).keys(userID: "user9", postID: "post1") }
        }
    }

    @Test func schemaConstraintsHoldEvenWhenCodeIsBypassed() throws {
        let store = try seeded()
        let attempts = [
            "INSERT INTO users (id, name, created_at) VALUES ('', '', 0)",
            "INSERT INTO users (id, name, created_at) VALUES ('a b', '', 0)",
            "INSERT INTO posts (id, author_id, body, created_at) VALUES ('p', 'nobody', 'x', 0)",
            "INSERT INTO posts (id, author_id, body, created_at) VALUES ('p', 'user1', '', 0)",
            "INSERT INTO likes (user_key, post_key, created_at) VALUES (999, 1, 0)",
            "INSERT INTO events (kind, user_id, post_id, like_count, at) VALUES ('exploded', 'user1', 'post1', 1, 0)",
            "INSERT INTO events (kind, user_id, post_id, like_count, at) VALUES ('liked', 'user1', 'post1', NULL, 0)",
            "INSERT INTO subscriber_cursors (name, last_seq, updated_at) VALUES ('s', -1, 0)",
        ]
        for sql in attempts {
            let error = try #require(throws: StorageError.self, "\(sql)") { try store.write { db in try db.execute(sql) } }
            guard case .database(let sqlite) = error else { Issue.record("unexpected \(error)"); continue }
            #expect(Int32(sqlite.code).map { ResultCode(rawValue: $0).primary } == .constraint, "\(sql)")
        }
    }

    @Test func feedPageIsNewestFirstWithTieBreakAndKeysetCursor() throws {
        let store = try FeedStore.inMemory()
        try store.write { db throws in
            try UserRepository(db).insert(id: "u", name: "", at: now)
            // Five posts, two sharing a creation time: insertion order breaks the tie (later first).
            let times: [Double] = [1, 2, 2, 3, 4]
            for (i, t) in times.enumerated() {
                try PostRepository(db).insert(id: "p\(i + 1)", authorID: "u", body: "b", at: now.addingTimeInterval(t))
            }
            let keys = try LikeRepository(db).keys(userID: "u", postID: "p3")
            try LikeRepository(db).insert(userKey: keys.user, postKey: keys.post, at: now)
        }
        let (first, second, viewer) = try store.read { db throws in
            let viewer = try UserRepository(db).key(for: "u")
            let first = try PostRepository(db).feedPage(viewerKey: viewer, before: nil, limit: 3)
            let second = try PostRepository(db).feedPage(viewerKey: viewer, before: FeedCursor(after: first[2].post), limit: 3)
            return (first, second, viewer)
        }
        #expect(viewer != nil)
        #expect(first.map(\.post.id) == ["p5", "p4", "p3"])
        #expect(second.map(\.post.id) == ["p2", "p1"])
        #expect(first.map(\.liked) == [false, false, true])
        #expect(first[2].post.likeCount == 1)
    }

    @Test func feedPageQueryUsesTheIndexesWithoutScanOrSort() throws {
        let store = try FeedStore.inMemory()
        let plan = try store.read { db in try db.makeStatement(PostRepository.feedPageSQL).queryPlan() }
        #expect(plan.contains { $0.hasPrefix("SEARCH p USING INDEX posts_feed") }, "\(plan)")
        #expect(plan.contains { $0 == "SEARCH l USING PRIMARY KEY (user_key=? AND post_key=?)" }, "\(plan)")
        #expect(
            !plan.contains { $0.hasPrefix("SCAN p") || $0.hasPrefix("SCAN posts") || $0.hasPrefix("SCAN l") || $0.hasPrefix("SCAN likes") },
            "\(plan)")
        #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
    }

    @Test func cursorsAreDurableAcrossReopen() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        do {
            let store = try FeedStore(path: path)
            try store.write { db in try SubscriberCursorRepository(db).setCursor(41, for: "mirror", at: now) }
            try store.write { db in try SubscriberCursorRepository(db).setCursor(42, for: "mirror", at: now) }
            store.close()
        }
        let reopened = try FeedStore(path: path)
        #expect(try reopened.read { db in try SubscriberCursorRepository(db).cursor(for: "mirror") } == 42)
        #expect(try reopened.read { db in try SubscriberCursorRepository(db).cursor(for: "other") } == nil)
    }

    @Test func bulkLoadKeepsCountsExactAndLaterLikesAreCounted() throws {
        let dir = TemporaryDirectory()
        let store = try FeedStore(path: dir.file("db.sqlite"))
        try BulkLoader.load(into: store) { loader in
            var users: [Int64] = []
            for u in 0..<20 { users.append(try loader.addUser(id: "user\(u)", name: "")) }
            var posts: [Int64] = []
            for p in 0..<50 { posts.append(try loader.addPost(id: "post\(p)", authorID: "user\(p % 20)", body: "b", createdAt: now)) }
            for u in users { for p in posts where (u + p) % 3 == 0 { try loader.addLike(userKey: u, postKey: p, createdAt: now) } }
        }
        try store.read { db throws in
            #expect(try InvariantChecker(db).violations().isEmpty)
            #expect(try db.fetchInt64("SELECT sum(like_count) FROM posts") == Int64(try LikeRepository(db).count()))
            #expect(try !InvariantChecker(db).isLogComplete())
        }
        // A like after the load moves the count by one.
        let before = try store.read { db in try db.fetchInt64("SELECT like_count FROM posts WHERE id = 'post0'") }
        try store.write { db throws in
            let keys = try LikeRepository(db).keys(userID: "user2", postID: "post0")
            #expect(try LikeRepository(db).insert(userKey: keys.user, postKey: keys.post, at: now))
        }
        #expect(try store.read { db in try db.fetchInt64("SELECT like_count FROM posts WHERE id = 'post0'") } == before.map { $0 + 1 })
        #expect(try store.read { db in try InvariantChecker(db).violations() }.isEmpty)
    }

    @Test func failedBulkLoadLeavesNothingAndKeepsTheSchema() throws {
        let store = try FeedStore.inMemory()
        let schema = try store.read { db in
            try db.fetchAll("SELECT sql FROM sqlite_schema ORDER BY name", decode: { $0.optionalString(at: 0) })
        }
        #expect(throws: StorageError.self) {
            try BulkLoader.load(into: store) { loader in
                _ = try loader.addUser(id: "a", name: "")
                _ = try loader.addUser(id: "a", name: "")
            }
        }
        try store.read { db throws in
            #expect(try UserRepository(db).count() == 0)
            #expect(try db.fetchAll("SELECT sql FROM sqlite_schema ORDER BY name", decode: { $0.optionalString(at: 0) }) == schema)
        }
    }

    @Test func checkerFindsABrokenCountAndReplayMismatch() throws {
        let store = try seeded()
        try store.write { db throws in
            let keys = try LikeRepository(db).keys(userID: "user1", postID: "post1")
            try LikeRepository(db).insert(userKey: keys.user, postKey: keys.post, at: now)
            // Corrupt on purpose: code never writes like_count, but nothing stops raw SQL from doing it.
            try db.execute("UPDATE posts SET like_count = 7 WHERE id = 'post1';")
        }
        let violations = try store.read { db in try InvariantChecker(db).violations() }
        #expect(violations.contains { $0.rule == "like-count" && $0.detail.contains("post1") })
        #expect(violations.contains { $0.rule == "log-replay" })
    }

    @Test func notADatabaseFileIsRefusedByTheStoreUntouched() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("x.sqlite")
        let content = Data(repeating: 0x41, count: 8192)
        try content.write(to: URL(fileURLWithPath: path))
        #expect(throws: StorageError.notADatabase(path: path)) { try FeedStore(path: path) }
        #expect(fileBytes(path) == content)
    }
}

@Suite struct CloseTests {
    @Test func closingTheStoreCheckpointsAndRemovesTheWAL() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("db.sqlite")
        let store = try FeedStore(path: path)
        _ = try store.write { db in try UserRepository(db).insert(id: "u", name: "", at: Date()) }
        _ = try store.read { db in try UserRepository(db).all() }
        #expect(FileManager.default.fileExists(atPath: path + "-wal"))
        store.close()
        #expect(!FileManager.default.fileExists(atPath: path + "-wal"))
        #expect(!FileManager.default.fileExists(atPath: path + "-shm"))
        let reopened = try FeedStore(path: path)
        #expect(try reopened.read { db in try UserRepository(db).count() } == 1)
    }
}
