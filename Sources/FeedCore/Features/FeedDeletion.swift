package import Foundation

/// Deleting posts and erasing users (`deleted_posts`, and the rows of every table that names them).
///
/// Implemented by both backends' transactions; the domain reaches it through ``FeedTransaction/deletion``. Each
/// operation does the row work only: the domain appends the events afterwards, last in the transaction.
package protocol FeedDeletion: AnyObject {
    /// Deletes a post with its likes and records its tombstone, when `actor` (`nil`: the operator) may delete it.
    ///
    /// On PostgreSQL the post's row is locked first, so a like of it either committed before (and goes with it) or
    /// waits and finds no post.
    func deletePost(id: String, by actor: String?, at time: Date) throws -> PostDeletionOutcome

    /// Erases a user: their posts (as ``deletePost(id:by:at:)``), their likes (each post's count corrected), their
    /// API tokens, their replicas' sync records, their id in every event (set to ''), and the user row.
    ///
    /// - Returns: what was removed, for the events; `nil` (nothing written) when no user has this id.
    func eraseUser(id: String, at time: Date) throws -> UserErasureRows?

    /// Which of `ids` are users (a server's check of its streams' viewers after an erasure): one statement on
    /// PostgreSQL, where each statement is a round trip; a look-up per id on SQLite.
    func existingUserIDs(_ ids: [String]) throws -> Set<String>
}

/// What deleting a post did.
package enum PostDeletionOutcome: Sendable, Hashable {
    /// The post, its likes and its count are gone; its id is tombstoned.
    case deleted(authorID: String)
    /// The post was deleted before: nothing written.
    case alreadyDeleted
    /// No post has this id, and none had: nothing written.
    case notFound
    /// The actor is not the post's author: nothing written.
    case forbidden
}

/// What erasing a user removed, for the events the domain appends.
package struct UserErasureRows: Sendable, Hashable {
    /// The user's posts, deleted with their likes, in key order.
    package var deletedPostIDs: [String]
    /// Each other post the user liked, with its like count afterwards, in key order.
    package var unlikedPosts: [PostCount]

    package init(deletedPostIDs: [String], unlikedPosts: [PostCount]) {
        self.deletedPostIDs = deletedPostIDs
        self.unlikedPosts = unlikedPosts
    }
}

/// A post's id and its like count.
package struct PostCount: Sendable, Hashable {
    package var postID: String
    package var likeCount: Int

    package init(postID: String, likeCount: Int) {
        self.postID = postID
        self.likeCount = likeCount
    }
}
