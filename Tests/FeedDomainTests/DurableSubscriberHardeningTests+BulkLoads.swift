import FeedSync
import FeedCore
import FeedDependencies
import FeedDomain
import FeedPostgresBackend
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

    @Test(arguments: TestBackend.allCases) func bulkLoadMakesASubscriberWithStateRebuildFromTheTables(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try service.executeSQL(Self.createLikeMirror)
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
        let postKeys = try service.firstColumn("SELECT post_key FROM posts ORDER BY post_key").compactMap(\.integer)
        try service.backend.bulkLoad { loader in
            for u in 0..<8 {
                let user = try loader.addUser(id: "bulk\(u)", name: "", createdAt: Date(timeIntervalSince1970: 0))
                for post in postKeys where (Int64(u) + post) % 2 == 0 {
                    _ = try loader.addLikeIfAbsent(userKey: user, postKey: post, createdAtMillis: 0)
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

    @Test(arguments: TestBackend.allCases) func freshSubscriberOnASeededDatabaseRebuildsOrFailsClearly(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try FeedService(location: location)
        try service.executeSQL(Self.createLikeMirror)
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

    @Test(arguments: TestBackend.allCases) func seedWithoutLikesNeedsNoRebuild(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        let service = try FeedService(location: location)
        try service.seed(SeedPlan(posts: 5, users: 5, likes: 0))
        let seq = try #require(try service.like(userID: "user1", postID: "post1").seq)
        let seen = LockedLog<Int64>()
        let subscriber = DurableSubscriber(name: "plain", service: service, delivery: .atLeastOnce { seen.append($0.seq) })
        #expect(try subscriber.catchUp() == 1)
        #expect(seen.values == [seq])
    }

    @Test(arguments: TestBackend.allCases)
    func databaseBulkLoadedUnderSchemaVersion1RebuildsItsSubscribersOnce(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let location = try backend.makeLocation(in: dir) else { return }
        do {
            // A version-1 database that was seeded with likes and has a subscriber that replayed the log.
            let old: any FeedBackend =
                switch backend {
                case .sqlite:
                    try FeedStore(path: location, migrator: Migrator(migrations: Migrator.embedded.migrations.filter { $0.version == 1 }))
                case .postgresql:
                    try PostgresBackend(
                        url: location,
                        migrator: PostgresMigrator(migrations: PostgresMigrator.embedded.migrations.filter { $0.version == 1 }))
                }
            _ = try old.write(
                { tx in
                    try tx.userStatements.execute("UPDATE log_state SET bulk_loaded = 1 WHERE id = 1")
                    try tx.userStatements.execute("INSERT INTO subscriber_cursors (name, last_seq, updated_at) VALUES ('old', 0, 0)")
                }, afterCommit: { _ in })
            old.close()
        }
        let service = try FeedService(location: location)
        #expect(try service.status().schemaVersion >= 2)
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
                case .postCreated, .userCreated, .likeCountChanged, .postDeleted, .userDeleted: break
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

    private static let createLikeMirror =
        "CREATE TABLE like_mirror (user_id TEXT NOT NULL, post_id TEXT NOT NULL, PRIMARY KEY (user_id, post_id))"

    /// The mirror's rows as `user/post`, sorted here (the backends' text collations differ).
    private func mirrorRows(_ service: FeedService) throws -> [String] {
        try service.firstColumn("SELECT user_id || '/' || post_id FROM like_mirror").compactMap(\.text).sorted()
    }

    /// The likes table's rows as `user/post`, sorted.
    private func likeRows(_ service: FeedService) throws -> [String] {
        try service.firstColumn(
            "SELECT u.id || '/' || p.id FROM likes l JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key"
        ).compactMap(\.text).sorted()
    }
}
