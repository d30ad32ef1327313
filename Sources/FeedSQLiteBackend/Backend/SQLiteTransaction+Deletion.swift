package import FeedCore
internal import FeedSQLite
package import Foundation

/// Deleting posts and erasing users on SQLite. The transaction holds SQLite's only write lock, so a like either
/// committed before (and goes with the post) or runs after and finds no post. Freed content is zeroed
/// (`secure_delete`) for the rest of the transaction, and the store checkpoints the WAL after the commit, so no
/// page image of a deleted row stays in the files.
extension SQLiteTransaction: FeedDeletion {
    package func deletePost(id: String, by actor: String?, at time: Date) throws -> PostDeletionOutcome {
        try connection.mapErrors {
            let found = try connection.fetchOne("SELECT post_key, author_id FROM posts WHERE id = ?", id) { row in
                (key: row.int64(at: 0), author: row.string(at: 1))
            }
            guard let (key, author) = found else {
                let deleted = try connection.fetchInt64("SELECT count(*) FROM deleted_posts WHERE id = ?", id) == 1
                return deleted ? .alreadyDeleted : .notFound
            }
            if let actor, actor != author { return .forbidden }
            try beginSecureDelete()
            try connection.run("DELETE FROM likes WHERE post_key = ?", key)
            try removePost(key: key, id: id, at: time)
            return .deleted(authorID: author)
        }
    }

    package func eraseUser(id: String, at time: Date) throws -> UserErasureRows? {
        try connection.mapErrors {
            guard let userKey = try connection.fetchInt64("SELECT user_key FROM users WHERE id = ?", id) else { return nil }
            try beginSecureDelete()
            let posts = try connection.fetchAll("SELECT post_key, id FROM posts WHERE author_id = ? ORDER BY post_key", id) { row in
                (key: row.int64(at: 0), id: row.string(at: 1))
            }
            if !posts.isEmpty {
                // Every like of the user's posts in one pass over the table (likes have no index by post).
                try connection.run(
                    "DELETE FROM likes WHERE post_key IN (SELECT post_key FROM posts WHERE author_id = ?)", id)
            }
            for post in posts { try removePost(key: post.key, id: post.id, at: time) }
            // The user's likes on other posts, through the primary key's prefix; each post's count moves with them.
            let liked = try connection.fetchAll(
                "SELECT l.post_key, p.id FROM likes l JOIN posts p ON p.post_key = l.post_key WHERE l.user_key = ? ORDER BY l.post_key",
                userKey
            ) { row in (key: row.int64(at: 0), id: row.string(at: 1)) }
            try connection.run("DELETE FROM likes WHERE user_key = ?", userKey)
            var unliked: [PostCount] = []
            unliked.reserveCapacity(liked.count)
            for post in liked {
                try connection.run("UPDATE posts SET like_count = like_count - 1 WHERE post_key = ?", post.key)
                let count = try connection.fetchInt64("SELECT like_count FROM posts WHERE post_key = ?", post.key) ?? 0
                unliked.append(PostCount(postID: post.id, likeCount: Int(count)))
            }
            try connection.run("DELETE FROM api_tokens WHERE user_id = ?", id)
            try connection.run(
                "DELETE FROM sync_rejections WHERE client_id IN (SELECT client_id FROM sync_clients WHERE user_id = ?)", id)
            try connection.run("DELETE FROM sync_clients WHERE user_id = ?", id)
            try connection.run("UPDATE events SET user_id = '' WHERE user_id = ?", id)
            try connection.run("DELETE FROM users WHERE user_key = ?", userKey)
            likeKeys?.forget(postIDs: posts.map(\.id), userID: id)
            return UserErasureRows(deletedPostIDs: posts.map(\.id), unlikedPosts: unliked)
        }
    }

    package func existingUserIDs(_ ids: [String]) throws -> Set<String> {
        let users = UserRepository(connection)
        return try Set(ids.filter { try users.key(for: $0) != nil })
    }

    /// Deletes a post whose likes are gone and records its tombstone.
    private func removePost(key: Int64, id: String, at time: Date) throws {
        try connection.run("DELETE FROM posts WHERE post_key = ?", key)
        try connection.run("INSERT INTO deleted_posts (id, deleted_at) VALUES (?, ?)", id, millis(time))
        likeKeys?.forget(postIDs: [id])
    }

    /// Zeroes freed content for the rest of this transaction (the store turns it off and checkpoints after it), and
    /// moves the deletion counter, so every process drops the keys it cached.
    private func beginSecureDelete() throws {
        guard !securelyDeleting else { return }
        try connection.execute("PRAGMA secure_delete = ON")
        securelyDeleting = true
        try connection.run("UPDATE deletions SET epoch = epoch + 1")
    }
}
