import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import FeedTestThreads
import Foundation
import Synchronization
import Testing

/// Schema version 4: each user's number of likes (`users.like_count`), kept by the like triggers, chooses the feed
/// page's form of the like flag; like batches take the users' rows in key order after the posts'.
// Blocks: two threads' like batches wait on each other's row locks on the PostgreSQL server.
@Suite(.ownThreads) struct UserLikeCountTests {
    private static func userCounts(_ db: TestDatabase) throws -> [[DatabaseValue]] {
        try db.admin("SELECT id, like_count FROM users ORDER BY id")
    }

    /// A database made and filled under version 3 (no user counts) is migrated: every user's count is its like rows,
    /// and later likes and unlikes move only their user's count.
    @Test func aVersion3DatabaseMigratesWithEachUsersLikesCounted() throws {
        guard let database = try PostgresTestDatabase.make("user_counts_v3") else { return }
        defer { database.drop() }
        let v3 = PostgresMigrator(migrations: Array(PostgresMigrator.embedded.migrations.prefix(3)))
        let old = try PostgresBackend(url: database.url, migrator: v3)
        try write(old) { tx throws in
            for id in ["u1", "u2", "u3"] { _ = try tx.insertUser(id: id, name: "", at: testTime) }
            // Posts go in as version 3's code wrote them (today's insertPost reads a later table).
            for id in ["p1", "p2", "p3"] {
                _ = try tx.userStatements.execute(
                    "INSERT INTO posts (id, author_id, body, created_at) VALUES ($1, 'u1', 'hello', 0)", [.text(id)])
            }
            for (user, post) in [("u1", "p1"), ("u1", "p2"), ("u1", "p3"), ("u2", "p1")] {
                let keys = try tx.pg.keys(userID: user, postID: post)
                _ = try tx.pg.insertLike(userKey: keys.user, postKey: keys.post, at: testTime)
                _ = try tx.pg.appendLikeChange(.liked, userID: user, postID: post, postKey: keys.post, at: testTime)
            }
        }
        old.close()
        let hasCounts = "SELECT count(*) FROM information_schema.columns WHERE table_name = 'users' AND column_name = 'like_count'"
        #expect(try PostgresAdmin.execute(url: database.url, hasCounts) == [[.integer(0)]])

        let backend = try PostgresBackend(url: database.url)
        defer { backend.close() }
        let counts = { try PostgresAdmin.execute(url: database.url, "SELECT id, like_count FROM users ORDER BY id") }
        #expect(try counts() == [[.text("u1"), .integer(3)], [.text("u2"), .integer(1)], [.text("u3"), .integer(0)]])
        try write(backend) { tx throws in
            let liked = try tx.pg.keys(userID: "u3", postID: "p2")
            #expect(try tx.pg.insertLike(userKey: liked.user, postKey: liked.post, at: testTime))
            _ = try tx.pg.appendLikeChange(.liked, userID: "u3", postID: "p2", postKey: liked.post, at: testTime)
            let unliked = try tx.pg.keys(userID: "u1", postID: "p1")
            #expect(try tx.pg.deleteLike(userKey: unliked.user, postKey: unliked.post))
            _ = try tx.pg.appendLikeChange(.unliked, userID: "u1", postID: "p1", postKey: unliked.post, at: testTime)
        }
        #expect(try counts() == [[.text("u1"), .integer(2)], [.text("u2"), .integer(1)], [.text("u3"), .integer(1)]])
        #expect(try backend.read { tx in try tx.maintenance.invariantViolations() } == [])
    }

    /// A bulk load inserts its likes with the count trigger off, then recounts posts and users alike.
    @Test func aBulkLoadCountsEachUsersLikes() throws {
        guard let db = try TestDatabase.make("user_counts_bulk") else { return }
        try db.backend.bulkLoad { loader in
            let author = try loader.addUser(id: "author", name: "", createdAt: testTime)
            let fan = try loader.addUser(id: "fan", name: "", createdAt: testTime)
            for index in 0..<30 {
                let post = try loader.addPost(id: "p\(index)", authorID: "author", body: "post", createdAt: testTime)
                _ = try loader.addLikeIfAbsent(userKey: fan, postKey: post, createdAtMillis: 0)
                if index % 3 == 0 { _ = try loader.addLikeIfAbsent(userKey: author, postKey: post, createdAtMillis: 0) }
            }
        }
        #expect(try Self.userCounts(db) == [[.text("author"), .integer(10)], [.text("fan"), .integer(30)]])
        #expect(try db.backend.read { tx in try tx.maintenance.invariantViolations() }.isEmpty)
    }

    /// The executed generic plan of a page statement (the plan the product keeps after five pages): for the scans of
    /// `likes` in it, whether each is the hashed set's (its condition names only the user) or the per-row probe's
    /// (it names the row's post too), and whether it ran.
    private static func likeScans(
        _ tx: any FeedTransaction, _ name: String, _ sql: String, _ arguments: [DatabaseValue]
    ) throws -> (set: Bool?, probe: Bool?) {
        _ = try tx.userStatements.fetch("SET LOCAL plan_cache_mode = force_generic_plan", [])
        _ = try tx.userStatements.fetch("PREPARE " + name + " AS " + sql, [])
        defer { _ = try? tx.userStatements.fetch("DEALLOCATE " + name, []) }
        // `EXECUTE` takes no bound parameters: the arguments are this test's own constants (integers and an id made of
        // letters and digits), written as literals.
        let literals = arguments.map { value -> String in
            switch value {
            case .integer(let number): return String(number)
            case .text(let text): return "'" + text + "'"
            default: return "NULL"
            }
        }
        let lines = try tx.userStatements.fetch(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE " + name + " (" + literals.joined(separator: ", ") + ")", []
        ).compactMap { $0.first?.text }
        var set: Bool?
        var probe: Bool?
        for (index, line) in lines.enumerated() where line.contains(" on likes l") {
            // The node's own lines, up to the next node: its index condition or filter.
            let details = lines[(index + 1)...].prefix { !$0.contains("->") && !$0.contains("Plan ") }
            let condition = details.first { $0.contains("Cond:") || $0.contains("Filter:") } ?? ""
            let ran = !line.contains("never executed")
            if condition.contains("post_key") { probe = ran } else { set = ran }
        }
        return (set, probe)
    }

    /// A viewer with likes up to five per row of the page has them read once into a hash table and no row probed;
    /// a viewer with more has each row probed and the set never read — by key and by id — and both flag exactly
    /// the posts the viewer likes.
    @Test func theLikeFlagReadsAFewLikesOnceAndProbesForMany() throws {
        guard let db = try TestDatabase.make("user_counts_forms", options: PostgresOptions(maximumConnections: 1)) else { return }
        let viewers = try db.backend.bulkLoad { loader -> [Int: Int64] in
            _ = try loader.addUser(id: "author", name: "", createdAt: testTime)
            var viewers: [Int: Int64] = [:]
            for count in [250, 251] { viewers[count] = try loader.addUser(id: "viewer\(count)", name: "", createdAt: testTime) }
            // Post i at i seconds; viewer n likes posts 0 ..< n.
            for index in 0..<400 {
                let post = try loader.addPost(
                    id: "p\(index)", authorID: "author", body: "post", createdAt: Date(timeIntervalSince1970: Double(index)))
                for (count, viewer) in viewers where index < count {
                    _ = try loader.addLikeIfAbsent(userKey: viewer, postKey: post, createdAtMillis: 0)
                }
            }
            return viewers
        }
        #expect(PostgresTransaction.likeSetLimit(forPageLimit: 50) == 250)
        for count in [250, 251] {
            let key = try #require(viewers[count])
            let heavy = count > 250
            try db.backend.readOnce { tx in
                let page: [DatabaseValue] = [.integer(.max), .integer(.max), .integer(50), .integer(250)]
                let byKey = try Self.likeScans(tx, "by_key", PostgresTransaction.feedPageSQL[0], [.integer(key)] + page)
                let byID = try Self.likeScans(
                    tx, "by_id", PostgresTransaction.feedPageByViewerIDSQL[0], [.text("viewer\(count)")] + page)
                #expect(byKey.set == !heavy && byKey.probe == heavy, "viewer with \(count) likes, by key: \(byKey)")
                #expect(byID.set == !heavy && byID.probe == heavy, "viewer with \(count) likes, by id: \(byID)")
            }
            // Posts 259 … 210: the viewer likes those below its count.
            let cursor = FeedCursor(createdAtMillis: 260_000, sequence: 0)
            let expected = (210..<min(count, 260)).reversed().map { "p\($0)" }
            let byKey = try db.backend.readOnce { tx in try tx.feedPage(for: .key(key), before: cursor, limit: 50).rows }
            let byID = try db.backend.readOnce { tx in try tx.feedPage(for: .id("viewer\(count)"), before: cursor, limit: 50) }
            #expect(byKey.map(\.post.id) == (210..<260).reversed().map { "p\($0)" })
            #expect(byKey.filter(\.liked).map(\.post.id) == expected, "viewer with \(count) likes")
            #expect(byID.rows == byKey)
        }
    }

    /// Two batches naming the same two users in opposite orders, on different posts, over and over on two
    /// connections: each takes the users' rows in key order before any like, so neither ever waits on the other in a
    /// cycle (a deadlock would fail a statement with SQLSTATE 40P01 after the server's `deadlock_timeout`).
    @Test func batchesNamingTheSameUsersInOppositeOrdersNeverDeadlock() throws {
        guard let db = try TestDatabase.make("user_counts_order") else { return }
        try write(db.backend) { tx throws in
            for id in ["a", "b"] { _ = try tx.insertUser(id: id, name: "", at: testTime) }
            for id in ["x1", "y1", "x2", "y2"] { _ = try tx.insertPost(id: id, authorID: "a", body: "post", at: testTime) }
        }
        let rounds = 300
        let failures = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { side in
            do {
                let connection = try PostgresConnection.open(
                    url: db.url, applicationName: "feedsync-test-lock-order", connectTimeout: .seconds(5),
                    statementTimeout: .seconds(20), readOnlyByDefault: false)
                defer { connection.close() }
                let users = side == 0 ? "{a,b}" : "{b,a}"
                let posts = side == 0 ? "{x1,y1}" : "{y2,x2}"
                for _ in 0..<rounds {
                    try connection.execute("BEGIN")
                    let result = try connection.execute(
                        """
                        SELECT failed_code FROM unnest(feedsync_like_results($1::integer[], $2::text[], $3::text[], $4::text[], $5::bigint[]))
                        """, [.text("{1,2}"), .text("{toggle,toggle}"), .text(users), .text(posts), .text("{0,0}")])
                    try connection.execute("COMMIT")
                    for row in 0..<result.rowCount where result.string(row, 0) != nil {
                        failures.withLock { $0.append("unit failed: \(result.string(row, 0) ?? "")") }
                    }
                }
            } catch {
                failures.withLock { $0.append("\(error)") }
            }
        }
        #expect(failures.withLock { $0 } == [])
        #expect(try Self.userCounts(db) == [[.text("a"), .integer(0)], [.text("b"), .integer(0)]])
        #expect(try db.backend.read { tx in try tx.maintenance.invariantViolations() }.isEmpty)
    }
}
