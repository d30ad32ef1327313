internal import FeedCore
internal import Foundation

/// A replica drops what its source deleted: a pulled `postDeleted` removes the post, and a snapshot page removes the
/// users and posts in its range that the source no longer has. Each removal leaves a tombstone, so no later step
/// (a snapshot page read before the deletion, a replay of the log) brings a post back.
extension ReplicaTables {
    /// Deletes a post the source deleted, with its likes and its kept base; returns the local `postDeleted` event,
    /// or nothing when the post is not here (deleted already, or never pulled).
    func deletePost(_ postID: String) throws -> [EventRecord] {
        guard case .deleted(let author) = try tx.deletion.deletePost(id: postID, by: nil, at: now) else { return [] }
        try store.setBase(of: postID, to: nil)
        return [try tx.appendEvent(kind: .postDeleted, userID: author, postID: postID, likeCount: nil, at: now)]
    }

    /// Erases a user the source no longer has (erased there), as the source did: their posts, their id in every local
    /// event, the user row. Events name nobody.
    func eraseUser(_ userID: String) throws -> [EventRecord] {
        guard let rows = try tx.deletion.eraseUser(id: userID, at: now) else { return [] }
        var events: [EventRecord] = []
        for postID in rows.deletedPostIDs {
            try store.setBase(of: postID, to: nil)
            events.append(try tx.appendEvent(kind: .postDeleted, userID: "", postID: postID, likeCount: nil, at: now))
        }
        for post in rows.unlikedPosts {
            events.append(try tx.appendEvent(kind: .unliked, userID: "", postID: post.postID, likeCount: post.likeCount, at: now))
        }
        events.append(try tx.appendEvent(kind: .userDeleted, userID: "", postID: nil, likeCount: nil, at: now))
        return events
    }

    /// After a snapshot page is applied: removes the local users and posts in the page's range that it did not
    /// carry — the source deleted them. `requested` is the position the page was asked from (`nil` for the first),
    /// `next` the one it gave (`nil` for the last); `boundary` is what the previous page returned. Returns the
    /// boundary for the next page.
    ///
    /// Users come by id, so their range is exact. Posts come by creation time and the source's insertion order,
    /// which the replica does not have: a page decides for the posts from the millisecond of the previous page's last
    /// post until (not including) the millisecond of its own last post; the posts of that boundary millisecond it
    /// carried are handed on, and the next page decides for them with its own.
    func dropMissing(
        from page: SyncSnapshot, requested: SyncSnapshotPosition?, next: SyncSnapshotPosition?, boundary: SnapshotBoundary?
    ) throws -> (events: [EventRecord], boundary: SnapshotBoundary?) {
        var events: [EventRecord] = []
        if requested?.usersDone != true {
            let through = next.flatMap { $0.usersDone ? nil : $0.userAfter }
            let carried = Set(page.users.map(\.id))
            for id in try store.userIDs(after: requested?.userAfter, through: through)
            where id != identity.userID && !carried.contains(id) {
                events += try eraseUser(id)
            }
        }
        guard next?.usersDone ?? true else { return (events, nil) }
        let before: Int64?
        if let next {
            guard let last = next.postAfter else { return (events, nil) }
            before = last.createdAtMillis
        } else {
            before = nil
        }
        let from = requested?.postAfter?.createdAtMillis
        let carried = Set(page.posts.map(\.id))
        for post in try store.sourcePosts(createdFrom: from, before: before) where !carried.contains(post.id) {
            // A post of the previous page's last millisecond: gone only if no page carried it.
            if let from, post.createdAt == from, boundary?.millis != from || boundary?.ids.contains(post.id) == true { continue }
            events += try deletePost(post.id)
        }
        guard let before else { return (events, nil) }
        var handed = SnapshotBoundary(millis: before, ids: Set(page.posts.filter { $0.createdAt == before }.map(\.id)))
        if let boundary, boundary.millis == before { handed.ids.formUnion(boundary.ids) }
        return (events, handed)
    }
}

/// The posts a snapshot's pages carried in the millisecond of the last page's last post, which the next page decides
/// for (``ReplicaTables/dropMissing(from:requested:next:boundary:)``).
struct SnapshotBoundary: Sendable, Hashable {
    var millis: Int64
    var ids: Set<String>
}
