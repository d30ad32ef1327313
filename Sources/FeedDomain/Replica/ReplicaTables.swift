internal import FeedCore
internal import Foundation

/// A replica's tables inside one transaction: its queue and cursor, and what the feed tables show.
///
/// The feed tables show the source's confirmed state with the pending mutations on top. For each post with a pending
/// like or unlike, the store keeps the state the source last confirmed (its base);
/// ``reconcile(_:confirmedLiked:confirmedCount:)`` recomputes what the tables show from it and the newest pending
/// intent, and appends a local event when that changed — the one place the shown state of a post is derived.
struct ReplicaTables {
    let tx: any FeedTransaction
    let store: any ReplicaStore
    let identity: ReplicaIdentity
    let now: Date

    /// The tables of a replica's transaction. - Throws: when the backend has no replicas.
    init(_ tx: any FeedTransaction, identity: ReplicaIdentity, now: Date) throws {
        guard let store = tx.replicaStore else {
            throw StorageError.constraintViolation(field: "database", reason: "a replica is a SQLite database")
        }
        self.tx = tx
        self.store = store
        self.identity = identity
        self.now = now
    }

    /// The replica user's key; `nil` until the first pull brought the user.
    private var userKey: Int64? { get throws { try tx.userKey(for: identity.userID) } }

    // MARK: The queue

    /// Queues a local write; returns its number.
    @discardableResult
    func enqueue(_ kind: SyncMutation.Kind, postID: String, body: String? = nil) throws -> Int64 {
        let stored: ReplicaMutation.Kind =
            switch kind {
            case .like: .like
            case .unlike: .unlike
            case .createPost: .createPost
            }
        return try store.enqueueMutation(stored, postID: postID, body: body, at: now)
    }

    /// Pending mutations after `number`, oldest first.
    func pending(after number: Int64, limit: Int) throws -> [SyncMutation] {
        try store.pendingMutations(after: number, limit: limit).map { mutation in
            let kind: SyncMutation.Kind =
                switch mutation.kind {
                case .like: .like
                case .unlike: .unlike
                case .createPost: .createPost
                }
            return SyncMutation(number: mutation.number, kind: kind, postID: mutation.postID, body: mutation.body)
        }
    }

    /// Records the source's refusals; the shown state of each post falls back to what the source confirmed.
    func reject(_ rejections: [SyncRejection]) throws -> [EventRecord] {
        var events: [EventRecord] = []
        for postID in try store.rejectMutations(rejections.map { SyncRejectionRecord(number: $0.number, reason: $0.reason) }) {
            events += try reconcile(postID)
        }
        return events
    }

    /// Removes the mutations through `number` from the queue: their effect is in the state pulled.
    func confirm(through number: Int64) throws -> [EventRecord] {
        var events: [EventRecord] = []
        for postID in try store.confirmMutations(through: number) { events += try reconcile(postID) }
        return events
    }

    // MARK: What the tables show

    /// Before a local like or unlike of `postID`: keeps the confirmed state of the post, unless it is kept already.
    func keepBase(of postID: String) throws {
        try store.keepBase(of: postID, userKey: try userKey ?? -1)
    }

    /// Sets what the source confirmed for a post (`nil` keeps that part) and makes the tables show it with the
    /// newest pending intent on top; returns the local event of the change, if the shown state changed.
    func reconcile(_ postID: String, confirmedLiked: Bool? = nil, confirmedCount: Int? = nil) throws -> [EventRecord] {
        guard let userKey = try userKey, let post = try store.replicaPost(postID, userKey: userKey) else { return [] }
        let base = post.base ?? ReplicaPostState.Base(liked: post.shownLiked, likeCount: post.shownCount)
        let confirmed = ReplicaPostState.Base(liked: confirmedLiked ?? base.liked, likeCount: confirmedCount ?? base.likeCount)
        try store.setBase(of: postID, to: post.intent == nil ? nil : confirmed)
        let liked = post.intent ?? confirmed.liked
        let count = max(0, confirmed.likeCount + (liked ? 1 : 0) - (confirmed.liked ? 1 : 0))
        if liked != post.shownLiked { try store.setShownLike(liked, userKey: userKey, postKey: post.postKey, at: now) }
        if count != post.shownCount { try store.setShownLikeCount(count, postKey: post.postKey) }
        if liked != post.shownLiked {
            return [try tx.appendEvent(kind: liked ? .liked : .unliked, userID: identity.userID, postID: postID, likeCount: count, at: now)]
        }
        if count != post.shownCount {
            return [try tx.appendEvent(kind: .likeCountChanged, userID: "", postID: postID, likeCount: count, at: now)]
        }
        return []
    }

    /// Adds a user the source has, unless it is here; a user added earlier without a name (as a post's author) gets
    /// the source's name.
    func addUser(id: String, name: String, createdAt: Int64) throws -> [EventRecord] {
        guard try tx.userKey(for: id) == nil else {
            if !name.isEmpty { try store.nameUser(id, name: name) }
            return []
        }
        let at = Date(timeIntervalSince1970: Double(createdAt) / 1000)
        _ = try tx.insertUser(id: id, name: name, at: at)
        return [try tx.appendEvent(kind: .userCreated, userID: id, postID: nil, likeCount: nil, at: at)]
    }

    /// Adds a post the source has, unless it is here or was deleted here (a snapshot page read before the source
    /// deleted it). A post this replica created, now confirmed, takes the source's creation time (the source's clock
    /// orders the feed); among posts of the same millisecond it keeps its place.
    func addPost(id: String, authorID: String, body: String, createdAt: Int64) throws -> [EventRecord] {
        if try tx.post(id: id) != nil {
            try store.setPostCreatedAt(createdAt, postID: id)
            return []
        }
        if try store.isDeletedPost(id) { return [] }
        var events = try addUser(id: authorID, name: "", createdAt: createdAt)
        let at = Date(timeIntervalSince1970: Double(createdAt) / 1000)
        _ = try tx.insertPost(id: id, authorID: authorID, body: body, at: at)
        events.append(try tx.appendEvent(kind: .postCreated, userID: authorID, postID: id, likeCount: nil, at: at))
        return events
    }
}
