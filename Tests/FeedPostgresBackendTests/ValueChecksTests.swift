import FeedCore
import FeedMigrations
@testable import FeedPostgresBackend
import FeedTestSupport
import FeedTestThreads
import Testing

/// The rules on ids, names, texts, counts and the log are checks on the values (domains): a like's writes meet no
/// table check on posts, users or the log's head, and every rule still refuses what it refused.
// Blocks: database calls on the test's thread.
@Suite(.ownThreads) struct ValueChecksTests {
    @Test func aLikesWritesMeetNoTableCheckButTheLogsShape() throws {
        guard let db = try TestDatabase.make("value_checks_tables") else { return }
        let checks = try db.admin(
            """
            SELECT conrelid::regclass::text, conname FROM pg_constraint
            WHERE contype = 'c' AND conrelid IN ('users'::regclass, 'posts'::regclass, 'likes'::regclass,
                                                 'events'::regclass, 'event_log_head'::regclass, 'like_lanes'::regclass)
            ORDER BY 1, 2
            """)
        #expect(
            checks == [
                [.text("events"), .text("events_like_count_present")], [.text("events"), .text("events_post_id_present")],
                [.text("events"), .text("events_user_deleted_names_nobody")],
            ])
        let domains = try db.admin(
            """
            SELECT c.relname || '.' || a.attname || ' ' || t.typname FROM pg_attribute a
            JOIN pg_class c ON c.oid = a.attrelid JOIN pg_type t ON t.oid = a.atttypid
            WHERE t.typtype = 'd' AND c.relname IN ('users', 'posts', 'events', 'event_log_head') ORDER BY 1
            """
        ).compactMap { $0.first }
        #expect(
            domains
                == [
                    "event_log_head.id feedsync_only_row", "event_log_head.last_seq feedsync_count",
                    "events.kind feedsync_event_kind", "events.like_count feedsync_count", "events.post_id feedsync_event_post",
                    "events.seq feedsync_seq", "events.user_id feedsync_event_user", "posts.body feedsync_post_text",
                    "posts.id feedsync_id", "posts.like_count feedsync_count", "users.id feedsync_id",
                    "users.like_count feedsync_count", "users.name feedsync_user_name",
                ].map { DatabaseValue.text($0) })
    }

    @Test func everyRuleStillRefusesWhatItRefused() throws {
        guard let db = try TestDatabase.make("value_checks_rules") else { return }
        try seedUsersAndPost(db.backend)
        let event = "INSERT INTO events (seq, kind, user_id, post_id, like_count, at) VALUES ($1, $2, $3, $4, $5, 0)"
        let refused: [(sql: String, arguments: [DatabaseValue], field: String)] = [
            ("INSERT INTO users (id, name, created_at) VALUES ($1, '', 0)", ["bad id"], "id"),
            ("UPDATE posts SET id = $1 WHERE id = 'p1'", [.text(String(repeating: "p", count: 65))], "id"),
            ("INSERT INTO users (id, name, created_at) VALUES ('u9', $1, 0)", [.text(String(repeating: "n", count: 201))], "user name"),
            ("INSERT INTO posts (id, author_id, body, created_at) VALUES ('p9', 'u1', $1, 0)", [""], "post text"),
            ("UPDATE posts SET like_count = like_count - 1 WHERE id = $1", ["p1"], "count"),
            ("UPDATE users SET like_count = like_count - 1 WHERE id = $1", ["u1"], "count"),
            (event, [0, "liked", "u1", "p1", 1], "seq"),
            (event, [1, "reposted", "u1", "p1", 1], "event kind"),
            (event, [1, "liked", .text(String(repeating: "u", count: 65)), "p1", 1], "event user"),
            (event, [1, "liked", "u1", "", 1], "event post"),
            (event, [1, "liked", "u1", "p1", -1], "count"),
            (event, [1, "liked", "u1", "p1", .null], "events_like_count_present"),
            (event, [1, "userCreated", "u1", "p1", .null], "events_post_id_present"),
            (event, [1, "userDeleted", "u1", .null, .null], "events_user_deleted_names_nobody"),
            ("INSERT INTO event_log_head (id, last_seq) VALUES ($1, 0)", [2], "only row"),
            ("UPDATE event_log_head SET last_seq = $1", [-1], "count"),
        ]
        try write(db.backend) { tx throws in
            for (sql, arguments, field) in refused {
                let error = #expect(throws: StorageError.self, "\(sql) \(arguments)") {
                    try tx.savepoint { try tx.userStatements.execute(sql, arguments) }
                }
                guard case .constraintViolation(let named, _) = error else {
                    Issue.record("\(sql) \(arguments): \(String(describing: error))")
                    continue
                }
                #expect(named == field, "\(sql) \(arguments)")
            }
            // What the rules let through still goes in: an erased user's event names nobody.
            try tx.userStatements.execute(event, [1, "userDeleted", "", .null, .null])
        }
        #expect(try db.admin("SELECT count(*) FROM events") == [[.integer(1)]])
    }
}

extension ValueChecksTests {
    /// A database at schema version 10 with likes, a deleted post and an erased user (whose events name `''`)
    /// migrates with every row and event as it was, and likes go on.
    @Test func aVersion10DatabaseWithDataMigratesWithEveryRowKept() throws {
        guard let database = try PostgresTestDatabase.make("value_checks_v10") else { return }
        defer { database.drop() }
        let v10 = PostgresMigrator(migrations: PostgresMigrator.embedded.migrations.filter { $0.version <= 10 })
        let old = try PostgresBackend(url: database.url, migrator: v10)
        try write(old) { tx throws in
            for id in ["u1", "u2", "gone"] { _ = try tx.insertUser(id: id, name: "User " + id, at: testTime) }
            for id in ["p1", "p2", "p3"] { _ = try tx.insertPost(id: id, authorID: "u1", body: "hello " + id, at: testTime) }
            let commands = [("u1", "p1"), ("u2", "p1"), ("gone", "p2"), ("u2", "p3")].map { LikeCommand(.like, userID: $0.0, postID: $0.1) }
            _ = try tx.applyLikes([LikeUnit(operations: commands, at: testTime)])
            _ = try tx.deletion.deletePost(id: "p3", by: nil, at: testTime)
            #expect(try tx.deletion.eraseUser(id: "gone", at: testTime) != nil)
        }
        old.close()
        let contents = {
            try PostgresAdmin.execute(url: database.url, "SELECT seq, kind, user_id, post_id, like_count, at FROM events ORDER BY seq")
                + PostgresAdmin.execute(url: database.url, "SELECT id, name, like_count FROM users ORDER BY id")
                + PostgresAdmin.execute(url: database.url, "SELECT id, author_id, body, like_count FROM posts ORDER BY id")
                + PostgresAdmin.execute(url: database.url, "SELECT id, last_seq FROM event_log_head")
        }
        let before = try contents()
        #expect(try PostgresAdmin.execute(url: database.url, "SELECT count(*) FROM events WHERE user_id = ''") != [[.integer(0)]])

        let backend = try PostgresBackend(url: database.url)
        defer { backend.close() }
        #expect(try backend.schemaStatus().databaseVersion == PostgresMigrator.embedded.latestVersion)
        #expect(try contents() == before)
        let outcomes = try write(backend) { tx throws in
            try tx.applyLikes([LikeUnit(operations: [LikeCommand(.toggle, userID: "u1", postID: "p2")], at: testTime)])
        }
        #expect(try outcomes.first?.get().first?.likeCount == 1)
        #expect(try backend.readOnce { tx in try tx.maintenance.counts() }.likes == 3)
    }
}
