public import FeedCore

/// The messages of the replica protocol: what a replica sends its source and what it gets back.
///
/// Every message is `Codable` and carries the protocol ``SyncProtocol/version``; a transport moves them as values
/// (in process) or as JSON (HTTP). Times are milliseconds since 1970-01-01 UTC, so any JSON client can read them.
/// The acting user is never in a message: the server mounting ``SyncEndpoint`` passes the user it authenticated.
public enum SyncProtocol {
    /// The version this build speaks. A message of another version is refused with
    /// ``SyncError/unsupportedVersion(_:)``. Version 3 sends deleted posts as changes (``SyncChange/Kind/postDeleted``),
    /// which a replica of version 2 could not read, and version 2 sent a snapshot in pages (``SyncSnapshotPosition``):
    /// a replica of an earlier version is refused and must be upgraded.
    public static let version = 3
    /// The most mutations one push may carry.
    public static let maximumPushSize = 1_000
    /// The most changes, or snapshot rows (users and posts), one pull step returns.
    public static let maximumPullSize = 10_000
}

/// One local write of a replica, as intent: `like` sets liked, `unlike` clears it, `createPost` creates a post.
/// Applying the same mutation twice has the effect of applying it once.
public struct SyncMutation: Sendable, Hashable, Codable {
    /// What the mutation does.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// The user likes the post afterwards.
        case like
        /// The user does not like the post afterwards.
        case unlike
        /// Creates the post with ``SyncMutation/body``, by the user.
        case createPost
    }

    /// The client's number for it: positive, growing with every mutation the client makes.
    public var number: Int64
    /// What it does.
    public var kind: Kind
    /// The post it concerns (or creates).
    public var postID: String
    /// The new post's text (``Kind/createPost`` only).
    public var body: String?

    /// Creates a mutation.
    public init(number: Int64, kind: Kind, postID: String, body: String? = nil) {
        self.number = number
        self.kind = kind
        self.postID = postID
        self.body = body
    }
}

/// A replica's pending mutations, in number order.
public struct PushRequest: Sendable, Hashable, Codable {
    /// The protocol version.
    public var version: Int
    /// The replica's client id (one per replica database, for good).
    public var clientID: String
    /// The mutations, numbers strictly increasing; at most ``SyncProtocol/maximumPushSize``.
    public var mutations: [SyncMutation]

    /// Creates a push of this build's version.
    public init(clientID: String, mutations: [SyncMutation], version: Int = SyncProtocol.version) {
        self.version = version
        self.clientID = clientID
        self.mutations = mutations
    }
}

/// A mutation the source refused for good, and why; it never blocks the mutations after it.
public struct SyncRejection: Sendable, Hashable, Codable {
    /// The mutation's number.
    public var number: Int64
    /// Why, in one line (`no post "p9"`).
    public var reason: String

    /// Creates a rejection.
    public init(number: Int64, reason: String) {
        self.number = number
        self.reason = reason
    }
}

/// The source's answer to a push.
public struct PushResponse: Sendable, Hashable, Codable {
    /// The protocol version.
    public var version: Int
    /// The highest mutation number the source has handled for this client (applied or rejected), this push or an
    /// earlier one: the replica sends only later ones next time.
    public var lastMutation: Int64
    /// The pushed mutations the source refused, including ones refused by an earlier delivery of the same push.
    public var rejected: [SyncRejection]

    /// Creates a response of this build's version.
    public init(lastMutation: Int64, rejected: [SyncRejection], version: Int = SyncProtocol.version) {
        self.version = version
        self.lastMutation = lastMutation
        self.rejected = rejected
    }
}

/// A replica asking what changed after its cursor.
public struct PullRequest: Sendable, Hashable, Codable {
    /// The protocol version.
    public var version: Int
    /// The replica's client id.
    public var clientID: String
    /// The source seq the replica's state reflects; `nil` asks for a snapshot (a new replica).
    public var after: Int64?
    /// The last answer's ``PullResponse/throughCheck``: lets the source tell whether `after` still names the event the
    /// replica has (after a failover or a restore, it may name another); `nil` when the replica has none.
    public var afterCheck: Int64?
    /// The source's bulk-load generation the replica's state includes (from the last response).
    public var bulkGeneration: Int64
    /// The most changes, or snapshot rows, to return (at most ``SyncProtocol/maximumPullSize``; 1,000 when `nil`).
    public var limit: Int?
    /// Where the snapshot being sent stands: the previous answer's ``PullResponse/nextSnapshot``, to get its next
    /// page; `nil` otherwise.
    public var snapshot: SyncSnapshotPosition?

    /// Creates a pull of this build's version.
    public init(
        clientID: String, after: Int64?, afterCheck: Int64? = nil, bulkGeneration: Int64 = 0, limit: Int? = nil,
        snapshot: SyncSnapshotPosition? = nil, version: Int = SyncProtocol.version
    ) {
        self.version = version
        self.clientID = clientID
        self.after = after
        self.afterCheck = afterCheck
        self.bulkGeneration = bulkGeneration
        self.limit = limit
        self.snapshot = snapshot
    }
}

/// Where a snapshot sent in pages stands: the source's seq it is taken at, and the last user and post sent.
///
/// Users come first (by id), then posts (oldest first). Each page is read at its own moment, so a later page may
/// already show changes after ``through``; the replica's next pull replays the log from ``through``, and as every
/// change carries absolute values (a like, a count), the replica ends equal to the source.
public struct SyncSnapshotPosition: Sendable, Hashable, Codable {
    /// The source's last seq when the snapshot began: the replica's cursor once the last page is applied.
    public var through: Int64
    /// The source's bulk-load generation when the snapshot began.
    public var bulkGeneration: Int64
    /// Whether the snapshot replaces a cursor the source could not serve.
    public var resync: Bool
    /// The id of the last user sent; `nil` before the first.
    public var userAfter: String?
    /// Whether every user was sent, so pages carry posts.
    public var usersDone: Bool
    /// The position of the last post sent; `nil` before the first.
    public var postAfter: FeedCursor?

    /// Creates a position.
    public init(
        through: Int64, bulkGeneration: Int64, resync: Bool, userAfter: String? = nil, usersDone: Bool = false,
        postAfter: FeedCursor? = nil
    ) {
        self.through = through
        self.bulkGeneration = bulkGeneration
        self.resync = resync
        self.userAfter = userAfter
        self.usersDone = usersDone
        self.postAfter = postAfter
    }
}

/// One change as the replica's user sees it: another user's like arrives as a count, without their id.
public struct SyncChange: Sendable, Hashable, Codable {
    /// What changed.
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A user was created (``SyncChange/userID``, ``SyncChange/name``).
        case user
        /// A post was created (``SyncChange/postID``, ``SyncChange/userID`` its author, ``SyncChange/body``).
        case post
        /// The replica's user liked or unliked a post (``SyncChange/liked``, ``SyncChange/likeCount``).
        case like
        /// A post's like count changed through another user (``SyncChange/likeCount``).
        case likeCount
        /// A post was deleted, with its likes (``SyncChange/postID``); its id is never used again.
        case postDeleted
    }

    /// The source's seq of the change.
    public var seq: Int64
    /// What changed.
    public var kind: Kind
    /// The user created, or the post's author; `nil` otherwise.
    public var userID: String?
    /// The created user's display name.
    public var name: String?
    /// The post concerned.
    public var postID: String?
    /// The created post's text.
    public var body: String?
    /// Whether the replica's user likes the post afterwards (``Kind/like``).
    public var liked: Bool?
    /// The post's like count afterwards (``Kind/like``, ``Kind/likeCount``).
    public var likeCount: Int?
    /// When the change committed on the source, in milliseconds since 1970.
    public var at: Int64

    /// Creates a change.
    public init(
        seq: Int64, kind: Kind, userID: String? = nil, name: String? = nil, postID: String? = nil, body: String? = nil,
        liked: Bool? = nil, likeCount: Int? = nil, at: Int64
    ) {
        self.seq = seq
        self.kind = kind
        self.userID = userID
        self.name = name
        self.postID = postID
        self.body = body
        self.liked = liked
        self.likeCount = likeCount
        self.at = at
    }
}

/// A page of everything a replica's user sees of the source: sent to a new replica, and instead of changes to one
/// whose cursor the source can no longer serve from its log (pruned, or behind a bulk load).
public struct SyncSnapshot: Sendable, Hashable, Codable {
    /// A user as a replica sees it.
    public struct User: Sendable, Hashable, Codable {
        /// The id, display name and creation time (milliseconds since 1970).
        public var id: String, name: String, createdAt: Int64

        /// Creates a user.
        public init(id: String, name: String, createdAt: Int64) {
            self.id = id
            self.name = name
            self.createdAt = createdAt
        }
    }

    /// A post as the replica's user sees it.
    public struct Post: Sendable, Hashable, Codable {
        /// The id, author, text and creation time (milliseconds since 1970).
        public var id: String, authorID: String, body: String, createdAt: Int64
        /// The like count, and whether the replica's user likes it.
        public var likeCount: Int, liked: Bool

        /// Creates a post.
        public init(id: String, authorID: String, body: String, createdAt: Int64, likeCount: Int, liked: Bool) {
            self.id = id
            self.authorID = authorID
            self.body = body
            self.createdAt = createdAt
            self.likeCount = likeCount
            self.liked = liked
        }
    }

    /// This page's users, ordered by id.
    public var users: [User]
    /// This page's posts, oldest first.
    public var posts: [Post]

    /// Creates a snapshot.
    public init(users: [User], posts: [Post]) {
        self.users = users
        self.posts = posts
    }
}

/// One complete, consistent step of the source's state after the replica's cursor.
public struct PullResponse: Sendable, Hashable, Codable {
    /// The protocol version.
    public var version: Int
    /// The changes after the request's cursor, in seq order (empty with a snapshot).
    public var changes: [SyncChange]
    /// The whole state instead of changes: for a new replica, or one the log can no longer serve (``resync``).
    public var snapshot: SyncSnapshot?
    /// Whether the snapshot replaces a cursor the source could not serve (pruned history, a bulk load after it).
    public var resync: Bool
    /// The source seq the replica's state reflects once it applied this step: its next cursor.
    public var through: Int64
    /// The source's bulk-load generation the step includes.
    public var bulkGeneration: Int64
    /// Whether more follows: the snapshot's next page, or changes after `through`.
    public var hasMore: Bool
    /// The ``EventRecord``'s check value of the source's event at ``through``, to send back as
    /// ``PullRequest/afterCheck``; `nil` when the log has no event there (pruned, or bulk-loaded rows).
    public var throughCheck: Int64?
    /// The highest mutation number of this client whose effect is in the state through ``through``; `nil` when the
    /// source has applied none, or the last one it applied lies after `through`.
    public var lastMutation: Int64?
    /// Set on a snapshot page that is not the last: ask again with it (``PullRequest/snapshot``). The replica's
    /// cursor stays where it was until the last page.
    public var nextSnapshot: SyncSnapshotPosition?

    /// Creates a response of this build's version.
    public init(
        changes: [SyncChange], snapshot: SyncSnapshot?, resync: Bool, through: Int64, bulkGeneration: Int64,
        hasMore: Bool, lastMutation: Int64?, nextSnapshot: SyncSnapshotPosition? = nil, throughCheck: Int64? = nil,
        version: Int = SyncProtocol.version
    ) {
        self.nextSnapshot = nextSnapshot
        self.throughCheck = throughCheck
        self.version = version
        self.changes = changes
        self.snapshot = snapshot
        self.resync = resync
        self.through = through
        self.bulkGeneration = bulkGeneration
        self.hasMore = hasMore
        self.lastMutation = lastMutation
    }
}
