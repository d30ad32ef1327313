internal import FeedCore
internal import Foundation

/// Deleting posts and erasing users on PostgreSQL. Rows are locked in the order every like-writing transaction keeps
/// (posts in key order, then users in key order, then likes; the log head last, when the domain appends the events),
/// and the triggers on `likes` move the posts' and users' counts as the like rows go.
extension PostgresTransaction: FeedDeletion {
    func deletePost(id: String, by actor: String?, at time: Date) throws -> PostDeletionOutcome {
        try requireWritable()
        // The post's row first: a like of it waits for this transaction, then finds no post.
        let found = try run("SELECT post_key, author_id FROM posts WHERE id = $1 FOR UPDATE", [.text(id)])
        guard found.rowCount > 0, let key = found.int64(0, 0), let author = found.string(0, 1) else {
            let deleted = try run("SELECT EXISTS (SELECT 1 FROM deleted_posts WHERE id = $1)", [.text(id)]).bool(0, 0) == true
            return deleted ? .alreadyDeleted : .notFound
        }
        if let actor, actor != author { return .forbidden }
        _ = try run(
            """
            SELECT 1 FROM users WHERE user_key IN (SELECT user_key FROM likes WHERE post_key = $1)
            ORDER BY user_key FOR UPDATE
            """, [.integer(key)])
        _ = try run("DELETE FROM likes WHERE post_key = $1", [.integer(key)])
        _ = try run("DELETE FROM posts WHERE post_key = $1", [.integer(key)])
        _ = try run("INSERT INTO deleted_posts (id, deleted_at) VALUES ($1, $2)", [.text(id), .integer(millis(time))])
        return .deleted(authorID: author)
    }

    func eraseUser(id: String, at time: Date) throws -> UserErasureRows? {
        try requireWritable()
        guard let userKey = try run("SELECT user_key FROM users WHERE id = $1", [.text(id)]).scalarInt64 else { return nil }
        let user: [DatabaseValue] = [.text(id), .integer(userKey)]
        // Posts: the user's and the ones they like, in key order.
        _ = try run(
            """
            SELECT 1 FROM posts WHERE author_id = $1 OR post_key IN (SELECT post_key FROM likes WHERE user_key = $2)
            ORDER BY post_key FOR UPDATE
            """, user)
        // Users: the user and everyone who likes one of their posts, in key order. Holding the user's row keeps new
        // posts of theirs out until this transaction ends.
        _ = try run(
            """
            SELECT 1 FROM users
            WHERE user_key = $2
               OR user_key IN (SELECT l.user_key FROM likes l JOIN posts p ON p.post_key = l.post_key WHERE p.author_id = $1)
            ORDER BY user_key FOR UPDATE
            """, user)
        let posts = try run("SELECT post_key, id FROM posts WHERE author_id = $1 ORDER BY post_key FOR UPDATE", [.text(id)])
        let postIDs = (0..<posts.rowCount).map { posts.string($0, 1) ?? "" }
        if !postIDs.isEmpty {
            _ = try run("DELETE FROM likes WHERE post_key IN (SELECT post_key FROM posts WHERE author_id = $1)", [.text(id)])
            _ = try run(
                """
                WITH gone AS (DELETE FROM posts WHERE author_id = $1 RETURNING id)
                INSERT INTO deleted_posts (id, deleted_at) SELECT id, $2 FROM gone
                """, [.text(id), .integer(millis(time))])
        }
        let unlikedKeys = try run("DELETE FROM likes WHERE user_key = $1 RETURNING post_key", [.integer(userKey)])
        var unliked: [PostCount] = []
        if unlikedKeys.rowCount > 0 {
            let keys = (0..<unlikedKeys.rowCount).compactMap { unlikedKeys.int64($0, 0) }
            let counts = try run(
                "SELECT id, like_count FROM posts WHERE post_key = ANY($1::bigint[]) ORDER BY post_key",
                [.text(PostgresArray.integers(keys))])
            unliked = (0..<counts.rowCount).map { row in
                PostCount(postID: counts.string(row, 0) ?? "", likeCount: Int(counts.int64(row, 1) ?? 0))
            }
        }
        _ = try run("DELETE FROM api_tokens WHERE user_id = $1", [.text(id)])
        _ = try run(
            "DELETE FROM sync_rejections WHERE client_id IN (SELECT client_id FROM sync_clients WHERE user_id = $1)", [.text(id)])
        _ = try run("DELETE FROM sync_clients WHERE user_id = $1", [.text(id)])
        _ = try run("UPDATE events SET user_id = '' WHERE user_id = $1", [.text(id)])
        // A like lane keeps its last batch's results for a resend; a unit that failed for an unknown user names the id in
        // its message (the user may have been created since). The results stay, for the resend, without the id.
        _ = try run(
            """
            UPDATE like_lanes SET results = ARRAY(
                SELECT ROW(r.failed_code, CASE WHEN r.failed_message = $1 THEN '' ELSE r.failed_message END,
                           r.liked, r.like_count, r.changed, r.seq)::feedsync_like_result
                FROM unnest(results) WITH ORDINALITY AS r(failed_code, failed_message, liked, like_count, changed, seq, n)
                ORDER BY r.n)
            WHERE EXISTS (SELECT 1 FROM unnest(results) AS r WHERE r.failed_message = $1)
            """, [.text(id)])
        _ = try run("DELETE FROM users WHERE user_key = $1", [.integer(userKey)])
        return UserErasureRows(deletedPostIDs: postIDs, unlikedPosts: unliked)
    }

    package func existingUserIDs(_ ids: [String]) throws -> Set<String> {
        guard !ids.isEmpty else { return [] }
        let result = try run("SELECT id FROM users WHERE id = ANY($1::text[])", [.text(PostgresArray.text(ids))])
        return Set((0..<result.rowCount).compactMap { result.string($0, 0) })
    }
}
