internal import FeedCore
internal import FeedDependencies

extension FeedService {
    /// Deletes a post with its likes and its count, in one transaction with one `postDeleted` event; its id is
    /// never used again, and a like of it fails with ``FeedError/postNotFound(_:)``. Deleting a deleted post changes
    /// nothing (`deleted == false`, `seq == nil`), as unliking an unliked post does.
    ///
    /// - Parameters:
    ///   - postID: the post.
    ///   - actor: the acting user, who must be the post's author; `nil` for the operator, who may delete any post.
    /// - Throws: ``FeedError/postNotFound(_:)`` for a post that never existed, ``FeedError/forbidden(userID:postID:)``
    ///   when `actor` is not its author, ``FeedError/invalidValue(field:value:reason:)``.
    @discardableResult
    public func deletePost(postID: String, by actor: String?) throws(FeedError) -> PostDeletion {
        try validateID(postID, field: "post id")
        if let actor { try validateID(actor, field: "user id") }
        try refuseOnReplica(postID, what: "delete posts")
        let now = date.now
        return try commit(value: postID) { tx, events in
            switch try tx.deletion.deletePost(id: postID, by: actor, at: now) {
            case .deleted(let author):
                let event = try tx.appendEvent(kind: .postDeleted, userID: author, postID: postID, likeCount: nil, at: now)
                events.append(event)
                return PostDeletion(postID: postID, deleted: true, seq: event.seq)
            case .alreadyDeleted:
                return PostDeletion(postID: postID, deleted: false, seq: nil)
            case .notFound:
                throw FeedError.postNotFound(postID)
            case .forbidden:
                throw FeedError.forbidden(userID: actor ?? "", postID: postID)
            }
        }
    }

    /// Erases a user, in one transaction: their posts (as ``deletePost(postID:by:)-17b9k``), their likes (each post's
    /// count corrected, with an `unliked` event that names nobody), their API tokens, their replicas' sync records,
    /// their id in every earlier event (seqs and kinds stay, so no follower sees a gap), and the user; then one
    /// `userDeleted` event, which names nobody either. An unknown user changes nothing (`deleted == false`).
    ///
    /// - Throws: ``FeedError/invalidValue(field:value:reason:)``.
    @discardableResult
    public func deleteUser(userID: String) throws(FeedError) -> UserErasure {
        try validateID(userID, field: "user id")
        try refuseOnReplica(userID, what: "delete users")
        let now = date.now
        let erasure = try commit(value: userID) { tx, events in
            guard let rows = try tx.deletion.eraseUser(id: userID, at: now) else {
                return UserErasure(userID: userID, deleted: false, deletedPosts: 0, removedLikes: 0, seq: nil)
            }
            for postID in rows.deletedPostIDs {
                events.append(try tx.appendEvent(kind: .postDeleted, userID: "", postID: postID, likeCount: nil, at: now))
            }
            for post in rows.unlikedPosts {
                events.append(try tx.appendEvent(kind: .unliked, userID: "", postID: post.postID, likeCount: post.likeCount, at: now))
            }
            let event = try tx.appendEvent(kind: .userDeleted, userID: "", postID: nil, likeCount: nil, at: now)
            events.append(event)
            return UserErasure(
                userID: userID, deleted: true, deletedPosts: rows.deletedPostIDs.count, removedLikes: rows.unlikedPosts.count,
                seq: event.seq)
        }
        if erasure.deleted { forgetViewerKey(userID) }
        return erasure
    }

    private func refuseOnReplica(_ value: String, what: String) throws(FeedError) {
        guard replicaIdentity.withLock({ $0 }) == nil else {
            throw FeedError.invalidValue(field: "database", value: value, reason: "a replica cannot \(what); do it on its source")
        }
    }
}
