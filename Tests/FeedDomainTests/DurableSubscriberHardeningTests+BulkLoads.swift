import FeedSync
import FeedCore
import FeedDependencies
import FeedDomain
import FeedPublishers
import FeedSQLite
import FeedMigrations
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// Bulk loads and seeding, which write no events: subscribers with state rebuild from the tables.
extension DurableSubscriberHardeningTests {
    // MARK: - Bulk loads

    @Test func bulkLoadMakesASubscriberWithStateRebuildFromTheTables() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        try service.store.write { db in
            try db.execute("CREATE TABLE like_mirror (user_id TEXT NOT NULL, post_id TEXT NOT NULL, PRIMARY KEY (user_id, post_id))")
        }
        let rebuilds = LockedLog<Int>()
        let subscriber = mirrorSubscriber(service: service, rebuilds: rebuilds)
        let signals = Recorder(subscriber.signals)
        for i in 0..<12 { _ = try service.toggle(userID: "user\(1 + i % 3)", postID: "post\(1 + (i * 5) % 3)") }
        service.settle()  // delivered before the subscriber starts: no live pass is queued ahead of its own
        try subscriber.catchUp()
        #expect(try mirrorRows(service) == likeRows(service))
        let cursorBeforeLoad = try subscriber.cursor()
        let lastBeforeLoad = try service.status().lastSeq
        #expect(cursorBeforeLoad == lastBeforeLoad)

        // Seed likes on the bulk path: no events. The subscriber is fully caught up, and would replay nothing.
        let postKeys = try service.store.read { db in
            try db.fetchAll("SELECT post_key FROM posts ORDER BY post_key") { $0.int64(at: 0) }
        }
        try BulkLoader.load(into: service.store) { loader in
            for u in 0..<8 {
                let user = try loader.addUser(id: "bulk\(u)", name: "")
                for post in postKeys where (Int64(u) + post) % 2 == 0 {
                    try loader.addLike(userKey: user, postKey: post, createdAt: Date(timeIntervalSince1970: 0))
                }
            }
        }
        #expect(try likeRows(service).count > (try mirrorRows(service)).count)
        let liveLike = try #require(try service.like(userID: "bulk1", postID: "post2").seq)

        try subscriber.start()
        defer { subscriber.stop() }
        #expect(
            signals.values.suffix(3) == [
                .needsRebuild(cursor: cursorBeforeLoad, prunedThrough: lastBeforeLoad), .rebuilt(seq: liveLike),
                .caughtUp(seq: liveLike),
            ])
        #expect(try mirrorRows(service) == likeRows(service))
        #expect(try subscriber.cursor() == liveLike)

        // Once rebuilt, it follows live changes incrementally and does not rebuild again.
        let next = try #require(try service.unlike(userID: "bulk0", postID: "post2").seq)
        #expect(signals.wait { $0.last == .caughtUp(seq: next) })
        #expect(try mirrorRows(service) == likeRows(service))
        #expect(rebuilds.values.count == 1)
    }

    @Test func freshSubscriberOnASeededDatabaseRebuildsOrFailsClearly() throws {
        let dir = TemporaryDirectory()
        let service = try FeedService(path: dir.file("feed.sqlite"))
        try service.store.write { db in
            try db.execute("CREATE TABLE like_mirror (user_id TEXT NOT NULL, post_id TEXT NOT NULL, PRIMARY KEY (user_id, post_id))")
        }
        let summary = try service.seed(SeedPlan(posts: 30, users: 12, likes: 90))
        #expect(summary.likes == 90)
        #expect(try service.status().lastSeq == 0)

        // No rebuild closure: the pass fails, it does not silently start from an empty state.
        let blind = DurableSubscriber(name: "blind", service: service, delivery: .atLeastOnce { _ in })
        let blindSignals = Recorder(blind.signals)
        #expect(throws: FeedError.self) { try blind.catchUp() }
        #expect(blindSignals.values.first == .needsRebuild(cursor: 0, prunedThrough: 0))

        let rebuilds = LockedLog<Int>()
        let subscriber = mirrorSubscriber(service: service, rebuilds: rebuilds)
        let signals = Recorder(subscriber.signals)
        #expect(try subscriber.catchUp() == 0)
        #expect(signals.values == [.needsRebuild(cursor: 0, prunedThrough: 0), .rebuilt(seq: 0), .caughtUp(seq: 0)])
        #expect(try mirrorRows(service).count == 90)
        let seq = try #require(try service.toggle(userID: "user1", postID: "post1").seq)
        #expect(try subscriber.catchUp() == 1)
        #expect(try mirrorRows(service) == likeRows(service))
        #expect(try subscriber.cursor() == seq)
        #expect(rebuilds.values.count == 1)
    }

    @Test func seedWithoutLikesNeedsNoRebuild() throws {
        let dir = TemporaryDirectory()
        let service = try FeedService(path: dir.file("feed.sqlite"))
        try service.seed(SeedPlan(posts: 5, users: 5, likes: 0))
        let seq = try #require(try service.like(userID: "user1", postID: "post1").seq)
        let seen = LockedLog<Int64>()
        let subscriber = DurableSubscriber(name: "plain", service: service, delivery: .atLeastOnce { seen.append($0.seq) })
        #expect(try subscriber.catchUp() == 1)
        #expect(seen.values == [seq])
    }

    @Test func databaseBulkLoadedUnderSchemaVersion1RebuildsItsSubscribersOnce() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        do {
            // A version-1 database that was seeded with likes and has a subscriber that replayed the log.
            let database = try Database(path: path)
            try Migrator(migrations: Migrator.embedded.migrations.filter { $0.version == 1 }).migrate(database)
            try database.write { db in
                try db.execute("UPDATE log_state SET bulk_loaded = 1 WHERE id = 1")
                try SubscriberCursorRepository(db).setCursor(0, for: "old", at: Date(timeIntervalSince1970: 0))
            }
            database.close()
        }
        let service = try FeedService(path: path)
        #expect(try service.store.schemaVersion().database >= 2)
        let rebuilds = LockedLog<Int>()
        let subscriber = DurableSubscriber(
            name: "old", service: service, delivery: .atLeastOnce { _ in }, rebuild: { _ in rebuilds.append(1) })
        let signals = Recorder(subscriber.signals)
        try subscriber.catchUp()
        try subscriber.catchUp()
        #expect(signals.values.first == .needsRebuild(cursor: 0, prunedThrough: 0))
        #expect(rebuilds.values.count == 1)
    }

    // MARK: - Helpers

    private func mirrorSubscriber(service: FeedService, rebuilds: LockedLog<Int>) -> DurableSubscriber {
        DurableSubscriber(
            name: "mirror", service: service, batchSize: 5,
            delivery: .transactional { event, db in
                guard let post = event.postID else { return }
                switch event.kind {
                case .liked: try db.run("INSERT INTO like_mirror (user_id, post_id) VALUES (?, ?)", event.userID, post)
                case .unliked: try db.run("DELETE FROM like_mirror WHERE user_id = ? AND post_id = ?", event.userID, post)
                case .postCreated, .userCreated, .likeCountChanged: break
                }
            },
            rebuild: { db in
                rebuilds.append(1)
                try db.execute(
                    """
                    DELETE FROM like_mirror;
                    INSERT INTO like_mirror (user_id, post_id)
                    SELECT u.id, p.id FROM likes l JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key;
                    """)
            })
    }

    private func mirrorRows(_ service: FeedService) throws -> [String] {
        try service.store.read { db in
            try db.fetchAll("SELECT user_id || '/' || post_id FROM like_mirror ORDER BY 1") { $0.string(at: 0) }
        }
    }

    private func likeRows(_ service: FeedService) throws -> [String] {
        try service.store.read { db in try LikeRepository(db).allPairs().map { "\($0.userID)/\($0.postID)" }.sorted() }
    }
}
