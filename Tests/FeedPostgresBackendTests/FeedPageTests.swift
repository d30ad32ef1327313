import FeedCore
import FeedPostgresBackend
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// The feed page statements on PostgreSQL: every page size gives the right rows, both forms agree, and the server
/// keeps one generic plan for them instead of planning every page again.
// Blocks: long synchronous PostgreSQL work: bulk loads of 1,205 posts and walks through every page.
@Suite(.ownThreads) struct FeedPageTests {
    /// 1,205 posts by one author at 400 distinct times (ties broken by key), a viewer who likes every seventh post.
    private static func seeded(_ label: String) throws -> (TestDatabase, viewerKey: Int64)? {
        guard let db = try TestDatabase.make(label, options: PostgresOptions(maximumConnections: 1)) else { return nil }
        let viewer = try db.backend.bulkLoad { loader -> Int64 in
            _ = try loader.addUser(id: "author", name: "", createdAt: testTime)
            let viewer = try loader.addUser(id: "viewer", name: "", createdAt: testTime)
            for index in 0..<1205 {
                let post = try loader.addPost(
                    id: "p\(index)", authorID: "author", body: "post \(index)", createdAt: Date(timeIntervalSince1970: Double(index % 400)))
                if index % 7 == 0 { _ = try loader.addLikeIfAbsent(userKey: viewer, postKey: post, createdAtMillis: 0) }
            }
            return viewer
        }
        return (db, viewer)
    }

    /// The expected feed: newest time first, then the later insertion (higher index) first.
    private static let expectedOrder: [Int] = (0..<1205).sorted { ($0 % 400, $0) > ($1 % 400, $1) }

    // Each bucket's edges (a page of 1 uses the same statement as 50; walking 1,205 pages of one row each made this
    // suite the heaviest of the ThreadSanitizer run and starved the publishers' stress tests past their bound).
    @Test(arguments: [50, 51, 200, 201, 1000, 1001])
    func everyPageSizeWalksTheWholeFeedOnce(limit: Int) throws {
        guard let (db, viewer) = try Self.seeded("page_sizes_\(limit)") else { return }
        var byKey: [FeedRow] = []
        var byID: [FeedRow] = []
        var cursor: FeedCursor?
        repeat {
            let page = try db.backend.readOnce { tx in try tx.feedPage(for: .key(viewer), before: cursor, limit: limit).rows }
            #expect(page.count <= limit)
            byKey += page
            cursor = page.count == limit ? page.last.map { FeedCursor(after: $0.post) } : nil
        } while cursor != nil
        repeat {
            let page = try db.backend.readOnce { tx in try tx.feedPage(for: .id("viewer"), before: cursor, limit: limit) }
            #expect(page.viewerKey == viewer)
            byID += page.rows
            cursor = page.rows.count == limit ? page.rows.last.map { FeedCursor(after: $0.post) } : nil
        } while cursor != nil
        #expect(byKey.map(\.post.id) == Self.expectedOrder.map { "p\($0)" })
        #expect(byKey.filter(\.liked).map(\.post.id) == Self.expectedOrder.filter { $0 % 7 == 0 }.map { "p\($0)" })
        #expect(byID == byKey)
    }

    /// Viewers with no likes, a few, and over a thousand spread over the feed: every page, by key and by id, at each
    /// page-size bucket and the uncapped statement, flags exactly the posts the viewer likes. The counts sit on both
    /// sides of where the statement turns from the hashed set of the viewer's likes to the per-row probe (five likes
    /// per row of the page: 250 for 50 rows, 1,000 for 200), and of 150 and 600, the bounds of other forms measured
    /// for the flag.
    @Test(arguments: [50, 200, 1000, 1001])
    func theLikeFlagIsRightForViewersWithFewAndWithManyLikes(limit: Int) throws {
        guard let db = try TestDatabase.make("page_like_sets_\(limit)", options: PostgresOptions(maximumConnections: 1)) else { return }
        let likeCounts = [0, 1, 149, 150, 151, 249, 250, 251, 599, 600, 601, 999, 1000, 1001, 1100]
        // Viewer n likes the first n posts of a scrambled order, so its likes are spread over the whole feed.
        let scrambled = (0..<1205).sorted { ($0 * 37) % 1205 < ($1 * 37) % 1205 }
        let viewers = try db.backend.bulkLoad { loader -> [Int: Int64] in
            _ = try loader.addUser(id: "author", name: "", createdAt: testTime)
            var viewers: [Int: Int64] = [:]
            for count in likeCounts { viewers[count] = try loader.addUser(id: "viewer\(count)", name: "", createdAt: testTime) }
            var posts: [Int64] = []
            for index in 0..<1205 {
                let createdAt = Date(timeIntervalSince1970: Double(index % 400))
                posts.append(try loader.addPost(id: "p\(index)", authorID: "author", body: "post \(index)", createdAt: createdAt))
            }
            for count in likeCounts {
                for index in scrambled.prefix(count) {
                    _ = try loader.addLikeIfAbsent(userKey: viewers[count]!, postKey: posts[index], createdAtMillis: 0)
                }
            }
            return viewers
        }
        for count in likeCounts {
            let expected = Set(scrambled.prefix(count).map { "p\($0)" })
            var byKey: [FeedRow] = []
            var byID: [FeedRow] = []
            var cursor: FeedCursor?
            repeat {
                let page = try db.backend.readOnce { tx in try tx.feedPage(for: .key(viewers[count]!), before: cursor, limit: limit).rows }
                byKey += page
                cursor = page.count == limit ? page.last.map { FeedCursor(after: $0.post) } : nil
            } while cursor != nil
            repeat {
                let page = try db.backend.readOnce { tx in try tx.feedPage(for: .id("viewer\(count)"), before: cursor, limit: limit) }
                byID += page.rows
                cursor = page.rows.count == limit ? page.rows.last.map { FeedCursor(after: $0.post) } : nil
            } while cursor != nil
            #expect(byKey.count == 1205, "viewer with \(count) likes")
            #expect(Set(byKey.filter(\.liked).map(\.post.id)) == expected, "viewer with \(count) likes")
            #expect(byKey.filter(\.liked).count == count, "viewer with \(count) likes")
            #expect(byID == byKey, "viewer with \(count) likes")
        }
    }

    @Test func anUnboundedPageReturnsEveryPost() throws {
        guard let (db, viewer) = try Self.seeded("page_unbounded") else { return }
        let rows = try db.backend.readOnce { tx in try tx.feedPage(for: .key(viewer), before: nil, limit: -1).rows }
        #expect(rows.map(\.post.id) == Self.expectedOrder.map { "p\($0)" })
        let byID = try db.backend.readOnce { tx in try tx.feedPage(for: .id("viewer"), before: nil, limit: -1) }
        #expect(byID.rows == rows)
    }

    @Test func pastTheEndTheViewerIsStillToldApartFromAnUnknownOne() throws {
        guard let (db, viewer) = try Self.seeded("page_past_end") else { return }
        let end = FeedCursor(createdAtMillis: -1, sequence: 0)
        let page = try db.backend.readOnce { tx in try tx.feedPage(for: .id("viewer"), before: end, limit: 20) }
        #expect(page.viewerKey == viewer && page.rows.isEmpty)
        #expect(throws: StorageError.userNotFound("ghost")) {
            try db.backend.readOnce { tx in try tx.feedPage(for: .id("ghost"), before: end, limit: 20) }
        }
        #expect(throws: StorageError.userNotFound("ghost")) {
            try db.backend.readOnce { tx in try tx.feedPage(for: .id("ghost"), before: nil, limit: 20) }
        }
    }

    /// PostgreSQL plans a prepared statement's first five runs for their values, then keeps its generic plan only
    /// when that costs no more. With the page size bound alone (`LIMIT $4`) the generic plan is costed at 10 % of the
    /// posts and never kept: every page would be planned again. One connection, so every page runs on the session whose
    /// `pg_prepared_statements` is read.
    @Test func thePageStatementsKeepAGenericPlan() throws {
        guard let (db, viewer) = try Self.seeded("page_generic_plan") else { return }
        for round in 0..<12 {
            let cursor = FeedCursor(createdAtMillis: Int64(390 - round) * 1000, sequence: .max)
            _ = try db.backend.readOnce { tx in try tx.feedPage(for: .key(viewer), before: cursor, limit: 20).rows }
            _ = try db.backend.readOnce { tx in try tx.feedPage(for: .id("viewer"), before: cursor, limit: 50) }
        }
        let plans = try db.backend.readOnce { tx in
            try tx.userStatements.fetch(
                """
                SELECT generic_plans, custom_plans FROM pg_prepared_statements
                WHERE statement LIKE '%FROM posts p%' AND statement LIKE '%likes l%'
                ORDER BY statement
                """, [])
        }
        #expect(plans.count == 2)
        for row in plans {
            // Five custom plans to learn the cost, then the generic one for the other seven.
            #expect(row == [.integer(7), .integer(5)])
        }
    }
}
