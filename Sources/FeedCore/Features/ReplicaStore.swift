package import Foundation

/// A replica's own tables (`replica_state`, `replica_mutations`, `replica_base`) and the writes that make the feed
/// tables show the source's confirmed state with the pending mutations on top.
///
/// A replica is a SQLite file: only the SQLite backend implements it. The domain reaches it through
/// ``FeedTransaction/replicaStore``, which is `nil` on a backend without replicas (so such a database is never one).
package protocol ReplicaStore: AnyObject {
    /// The replica's identity, or `nil` when the database is not a replica.
    func replicaIdentity() throws -> ReplicaIdentity?
    /// Makes the database a replica. - Throws: `constraintViolation` when it holds users, posts or events.
    func startReplica(_ identity: ReplicaIdentity) throws
    /// How far the replica synced and pushed.
    func replicaCursor() throws -> ReplicaCursor
    /// The cursor, the last sync's time and error, the queue's counts and its latest `limit` refusals (newest first).
    func replicaProgress(recentRejections limit: Int) throws -> ReplicaProgress
    /// Records a completed pull step: the source seq and bulk generation reached; clears the last error.
    func recordPull(through seq: Int64, check: Int64?, bulkGeneration: Int64, at time: Date) throws
    /// Records that the source handled the mutations through `number` (the mark never goes back).
    func recordPush(through number: Int64) throws
    /// Records why the last sync failed, or clears it.
    func recordSyncError(_ message: String?) throws
    /// Queues a local write; returns its number.
    func enqueueMutation(_ kind: ReplicaMutation.Kind, postID: String, body: String?, at time: Date) throws -> Int64
    /// Queued mutations not refused with numbers after `number`, oldest first.
    func pendingMutations(after number: Int64, limit: Int) throws -> [ReplicaMutation]
    /// Marks mutations refused (a refusal recorded already is kept); returns the post of each newly refused one.
    func rejectMutations(_ rejections: [SyncRejectionRecord]) throws -> [String]
    /// Removes the unrefused mutations through `number` from the queue; returns their posts, each once, sorted.
    func confirmMutations(through number: Int64) throws -> [String]
    /// Before a local like or unlike: keeps the post's shown state as its confirmed base, unless a base is kept.
    func keepBase(of postID: String, userKey: Int64) throws
    /// What the tables show of a post for the user, its kept base and the newest pending like intent; `nil` when
    /// there is no such post.
    func replicaPost(_ postID: String, userKey: Int64) throws -> ReplicaPostState?
    /// Keeps `base` as the post's confirmed state, or forgets it (`nil`).
    func setBase(of postID: String, to base: ReplicaPostState.Base?) throws
    /// Makes the tables show whether the user likes the post (adds or removes the like row only).
    func setShownLike(_ liked: Bool, userKey: Int64, postKey: Int64, at time: Date) throws
    /// Makes the tables show the post's like count.
    func setShownLikeCount(_ count: Int, postKey: Int64) throws
    /// Gives a post the source's creation time (milliseconds since 1970).
    func setPostCreatedAt(_ millis: Int64, postID: String) throws
    /// Gives a user added without a name (as a post's author) the source's name.
    func nameUser(_ id: String, name: String) throws
    /// Whether the post was deleted here (its id has a tombstone), so that no later step brings it back.
    func isDeletedPost(_ postID: String) throws -> Bool
    /// The ids of the users after `after` (`nil`: from the first) through `through` (`nil`: to the last), by id.
    func userIDs(after: String?, through: String?) throws -> [String]
    /// The ids and creation times of the posts created from `from` (inclusive) until `before` (exclusive), in
    /// milliseconds since 1970 (`nil`: unbounded), except posts this replica created (their `createPost` is queued,
    /// or was refused).
    func sourcePosts(createdFrom from: Int64?, before: Int64?) throws -> [(id: String, createdAt: Int64)]
}

/// What makes a database a replica: where it syncs from, as whom, under which client id.
package struct ReplicaIdentity: Sendable, Hashable {
    package let source: String
    package let userID: String
    package let clientID: String

    package init(source: String, userID: String, clientID: String) {
        self.source = source
        self.userID = userID
        self.clientID = clientID
    }
}

/// How far a replica synced and pushed.
package struct ReplicaCursor: Sendable, Hashable {
    /// The source seq the state reflects; `nil` before the first pull.
    package var syncedSeq: Int64?
    /// The source's ``EventRecord/check`` of its event at ``syncedSeq``, when its last answer gave one.
    package var syncedCheck: Int64?
    /// The source's bulk-load generation the state includes.
    package var bulkGeneration: Int64
    /// The highest mutation number the source acknowledged.
    package var pushedThrough: Int64

    package init(syncedSeq: Int64?, syncedCheck: Int64? = nil, bulkGeneration: Int64, pushedThrough: Int64) {
        self.syncedSeq = syncedSeq
        self.syncedCheck = syncedCheck
        self.bulkGeneration = bulkGeneration
        self.pushedThrough = pushedThrough
    }
}

/// A replica's progress, for its status.
package struct ReplicaProgress: Sendable, Hashable {
    package let cursor: ReplicaCursor
    package let lastSyncAt: Date?
    package let lastError: String?
    package let pending: Int
    package let rejected: Int
    package let recentRejections: [SyncRejectionRecord]

    package init(
        cursor: ReplicaCursor, lastSyncAt: Date?, lastError: String?, pending: Int, rejected: Int,
        recentRejections: [SyncRejectionRecord]
    ) {
        self.cursor = cursor
        self.lastSyncAt = lastSyncAt
        self.lastError = lastError
        self.pending = pending
        self.rejected = rejected
        self.recentRejections = recentRejections
    }
}

/// One queued local write of a replica, as intent.
package struct ReplicaMutation: Sendable, Hashable {
    /// What it does.
    package enum Kind: String, Sendable, Hashable {
        case like, unlike, createPost
    }

    package let number: Int64
    package let kind: Kind
    package let postID: String
    package let body: String?

    package init(number: Int64, kind: Kind, postID: String, body: String?) {
        self.number = number
        self.kind = kind
        self.postID = postID
        self.body = body
    }
}

/// A post as a replica's tables show it to their user, with what reconciling it needs.
package struct ReplicaPostState: Sendable, Hashable {
    /// A post's state as the source last confirmed it.
    package struct Base: Sendable, Hashable {
        package let liked: Bool
        package let likeCount: Int

        package init(liked: Bool, likeCount: Int) {
            self.liked = liked
            self.likeCount = likeCount
        }
    }

    package let postKey: Int64
    package let shownLiked: Bool
    package let shownCount: Int
    /// The kept confirmed state, while likes of the post are pending.
    package let base: Base?
    /// The newest pending like (`true`) or unlike (`false`) of the post, if any.
    package let intent: Bool?

    package init(postKey: Int64, shownLiked: Bool, shownCount: Int, base: Base?, intent: Bool?) {
        self.postKey = postKey
        self.shownLiked = shownLiked
        self.shownCount = shownCount
        self.base = base
        self.intent = intent
    }
}
