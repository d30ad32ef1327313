internal import FeedCore
internal import Foundation

/// The feed page: one statement per page, with a plan PostgreSQL keeps.
extension PostgresTransaction {

    // The feed page statements. Each caps its rows twice: an inner `LIMIT` that is a constant of the statement's
    // text (the smallest of `pageSizeBuckets` that holds the page) and an outer `LIMIT $4`, the page size, bound.
    // With the bound limit alone PostgreSQL never keeps a generic plan for them: it costs a generic plan's unknown
    // `LIMIT` at 10 % of the table's matching rows, far above the custom plans for 50 rows, so every page would be
    // planned again (~40 µs a page, measured with libpq alone: 200 µs against 160 µs with a constant limit). Under a
    // constant cap the generic plan costs no more than a custom one and is kept; the outer limit stops the index
    // scan at the page size, so the cap is never read past. The caps are this file's constants, never input.

    /// The inner caps; a page larger than the last, or unbounded (`limit < 0`), uses a statement without one.
    static let pageSizeBuckets = [50, 200, 1000]
    /// `pageSizeBuckets` as statement text (integer constants of this file, then none for the uncapped statement).
    private static let pageCapClauses = pageSizeBuckets.map { "\nLIMIT " + String($0) } + [""]

    /// The feed page query: the same order and cursor semantics as the SQLite backend's `PostRepository.feedPage`.
    ///
    /// The row comparison seeks into `posts_feed (created_at, post_key)`, scanned backwards. The like flag takes one
    /// of two forms, chosen per page by the viewer's stored number of likes (`users.like_count`, schema version 4)
    /// against the bound `$5` (``likeSetLimit(forPageLimit:)``):
    /// - up to it, the viewer's likes are read once into a hash table (a hashed subplan: one index range scan), and
    ///   each row is a hash lookup — the cheapest form for most viewers;
    /// - above it, each row is one primary-key probe, so that a viewer with 100,000 likes costs a page
    ///   O(limit · log n), not a read of all those likes.
    /// Both are in the one generic plan; the `CASE` runs only the chosen one. An unknown viewer (no `users` row, so
    /// a `NULL` count) takes the probe, which finds nothing.
    static let feedPageSQL: [String] = pageCapClauses.map { cap in
        """
        SELECT * FROM (
            SELECT p.id, p.author_id, p.body, p.created_at, p.like_count, p.post_key,
                   CASE WHEN (SELECT like_count FROM users WHERE user_key = $1) <= $5
                   THEN p.post_key IN (SELECT l.post_key FROM likes l WHERE l.user_key = $1)
                   ELSE (SELECT true FROM likes l WHERE l.user_key = $1 AND l.post_key = p.post_key) IS NOT NULL
                   END AS liked
            FROM posts p
            WHERE (p.created_at, p.post_key) < ($2, $3)
            ORDER BY p.created_at DESC, p.post_key DESC
        """ + cap + pageOuterLimit
    }

    /// The page for a viewer known by id, in one statement (one round trip): the viewer's key and like count are
    /// `InitPlan`s (each looked up once), used by the like flag as in ``feedPageSQL``; the key is returned in the
    /// first column of every row (`NULL`: no such user). A page with no rows says nothing about the viewer; the
    /// caller looks it up then (the end of the feed).
    static let feedPageByViewerIDSQL: [String] = pageCapClauses.map { cap in
        """
        SELECT * FROM (
            SELECT (SELECT user_key FROM users WHERE id = $1) AS viewer_key,
                   p.id, p.author_id, p.body, p.created_at, p.like_count, p.post_key,
                   CASE WHEN (SELECT like_count FROM users WHERE id = $1) <= $5
                   THEN p.post_key IN (
                       SELECT l.post_key FROM likes l WHERE l.user_key = (SELECT user_key FROM users WHERE id = $1))
                   ELSE (SELECT true FROM likes l
                         WHERE l.user_key = (SELECT user_key FROM users WHERE id = $1) AND l.post_key = p.post_key)
                        IS NOT NULL
                   END AS liked
            FROM posts p
            WHERE (p.created_at, p.post_key) < ($2, $3)
            ORDER BY p.created_at DESC, p.post_key DESC
        """ + cap + pageOuterLimit
    }

    /// The most likes a viewer may have for a page of `limit` rows to read them into a hash table rather than probe
    /// each row: five per row (250 for a page of 50), where the two forms cost the same. Measured with pgbench on
    /// W2's database, pages of 50: the set ~17 % faster at ~100 likes, even at 250, 10–18 % slower at 500, a third
    /// slower at 1,000, a third the speed at 2,000 (`Docs/decisions/0006-postgresql-like-flag-by-stored-count.md`).
    /// An unbounded page (`limit < 0`) counts as the largest capped one.
    static func likeSetLimit(forPageLimit limit: Int) -> Int64 {
        5 * Int64(limit >= 0 ? min(limit, Int(Int32.max)) : pageSizeBuckets[pageSizeBuckets.count - 1])
    }

    /// The end of both page statements: the page size, bound.
    private static let pageOuterLimit = "\n) p\nLIMIT $4"

    /// The statement of `statements` (one per bucket, then the uncapped one) for a page of `limit` rows.
    private static func statement(_ statements: [String], limit: Int) -> String {
        guard limit >= 0, let bucket = pageSizeBuckets.firstIndex(where: { limit <= $0 }) else { return statements[statements.count - 1] }
        return statements[bucket]
    }

    func feedPage(for viewer: FeedViewer, before cursor: FeedCursor?, limit: Int) throws -> (viewerKey: Int64?, rows: [FeedRow]) {
        switch viewer {
        case .anonymous: (nil, try feedPage(viewerKey: nil, before: cursor, limit: limit))
        case .key(let key): (key, try feedPage(viewerKey: key, before: cursor, limit: limit))
        case .id(let id): try feedPage(viewerID: id, before: cursor, limit: limit)
        }
    }

    private func feedPage(viewerKey: Int64?, before cursor: FeedCursor?, limit: Int) throws -> [FeedRow] {
        let after = cursor ?? FeedCursor(createdAtMillis: .max, sequence: .max)
        // SQLite reads a negative LIMIT as no limit; PostgreSQL reads NULL so.
        let limitValue: DatabaseValue = limit < 0 ? .null : .integer(Int64(limit))
        let result = try run(
            Self.statement(Self.feedPageSQL, limit: limit),
            [
                .integer(viewerKey ?? -1), .integer(after.createdAtMillis), .integer(after.sequence), limitValue,
                .integer(Self.likeSetLimit(forPageLimit: limit)),
            ],
            binaryResults: true)
        return (0..<result.rowCount).map { row in
            FeedRow(post: Self.decodePost(result, row: row), liked: result.bool(row, 6) ?? false)
        }
    }

    /// The page and the viewer's key in one statement (one round trip).
    private func feedPage(viewerID: String, before cursor: FeedCursor?, limit: Int) throws -> (viewerKey: Int64?, rows: [FeedRow]) {
        let after = cursor ?? FeedCursor(createdAtMillis: .max, sequence: .max)
        let limitValue: DatabaseValue = limit < 0 ? .null : .integer(Int64(limit))
        let result = try run(
            Self.statement(Self.feedPageByViewerIDSQL, limit: limit),
            [
                .text(viewerID), .integer(after.createdAtMillis), .integer(after.sequence), limitValue,
                .integer(Self.likeSetLimit(forPageLimit: limit)),
            ],
            binaryResults: true)
        guard result.rowCount > 0 else {
            // Past the end of the feed (or an empty one): the page's statement returned no row to carry the key.
            guard let key = try userKey(for: viewerID) else { throw StorageError.userNotFound(viewerID) }
            return (key, [])
        }
        guard let key = result.int64(0, 0) else { throw StorageError.userNotFound(viewerID) }
        return (
            key,
            (0..<result.rowCount).map { row in
                FeedRow(post: Self.decodePost(result, row: row, from: 1), liked: result.bool(row, 7) ?? false)
            }
        )
    }

    static func decodePost(_ result: PostgresResult, row: Int, from column: Int = 0) -> Post {
        Post(
            id: result.string(row, column) ?? "", authorID: result.string(row, column + 1) ?? "",
            body: result.string(row, column + 2) ?? "", createdAt: date(millis: result.int64(row, column + 3) ?? 0),
            likeCount: Int(result.int64(row, column + 4) ?? 0), sequence: result.int64(row, column + 5) ?? 0)
    }

}
