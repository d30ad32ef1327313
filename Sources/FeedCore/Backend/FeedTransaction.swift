package import Foundation

/// One transaction (or snapshot) on a FeedSync database: every read and write the domain's core makes.
///
/// Handed to the closures of ``FeedBackend/write(_:afterCommit:)`` and ``FeedBackend/read(_:)``; valid only while
/// the closure runs, on its thread (it is not `Sendable`). In a read transaction the writing methods fail with
/// ``StorageError/readOnly(path:)``. Errors are ``StorageError``s: constraint failures arrive as the specific case
/// (`userNotFound`, `postAlreadyExists`, …), never as a database message.
///
/// Integer keys (`userKey`, `postKey`) are the backend's surrogate keys; they never change once assigned.
package protocol FeedTransaction: AnyObject {
    // MARK: Users and posts

    /// Inserts a user. - Throws: ``StorageError/userAlreadyExists(_:)``, ``StorageError/constraintViolation(field:reason:)``.
    func insertUser(id: String, name: String, at time: Date) throws -> User
    /// Inserts a post by an existing user. - Throws: `userNotFound`, `postAlreadyExists`, `constraintViolation`.
    func insertPost(id: String, authorID: String, body: String, at time: Date) throws -> Post
    /// The key of a user, or `nil` when there is none.
    func userKey(for id: String) throws -> Int64?
    /// A post, or `nil`.
    func post(id: String) throws -> Post?
    /// Every user, ordered by id.
    func allUsers() throws -> [User]
    /// One feed page: up to `limit` posts older than `cursor` (newest first; all when `limit < 0`), with whether the
    /// viewer likes each, and the viewer's key (`nil` for ``FeedViewer/anonymous``). A viewer known by id is looked
    /// up with the page: in the page's own statement on a backend where each statement is a round trip (PostgreSQL).
    /// - Throws: `userNotFound` when ``FeedViewer/id(_:)`` names no user.
    func feedPage(for viewer: FeedViewer, before cursor: FeedCursor?, limit: Int) throws -> (viewerKey: Int64?, rows: [FeedRow])

    // MARK: Likes

    /// Whether the user likes the post.
    func likeExists(userKey: Int64, postKey: Int64) throws -> Bool
    /// The ids of the posts the user likes.
    func likedPostIDs(userKey: Int64) throws -> Set<String>

    // MARK: The event log

    /// Appends an event in this transaction and returns it with its seq.
    ///
    /// Seqs are dense and in commit order on every backend: once a reader has read through seq P, no event at
    /// or before P ever appears later. A backend whose sequence is taken at insert (PostgreSQL) must make this
    /// true by its own means — on PostgreSQL the `event_log_head` row lock, held from the append to the commit, so
    /// event-writing transactions commit one at a time in seq order (see `Docs/Storage.md`).
    ///
    /// **Call it last**, after every row change of the transaction: the log is the last lock an event-writing
    /// transaction takes. Then the holder of the log's turn waits for nothing but its own commit, so no two
    /// transactions deadlock on it (PostgreSQL: one holding the head and waiting for a post's row while another holds
    /// that row and waits for the head), and transactions do their row work in parallel, queueing only for the
    /// append and the commit. SQLite: its write transactions are one at a time anyway.
    func appendEvent(kind: EventKind, userID: String, postID: String?, likeCount: Int?, at time: Date) throws -> EventRecord
    /// Applies several callers' like commands in this transaction and returns one result per unit, in order: each
    /// change writes the like, keeps the post's like count and appends one event carrying the count after it.
    ///
    /// A unit commits or fails as a whole. A unit that names an unknown user or post is reported as `.failure`
    /// (``StorageError/userNotFound(_:)``, ``StorageError/postNotFound(_:)``) with nothing of it written, and the
    /// others go on. Any other failure throws, and what the call wrote is then undone only by rolling back (the
    /// caller runs each unit in its own ``savepoint(_:)`` to isolate one). Events are appended after the units' row
    /// changes, as ``appendEvent(kind:userID:postID:likeCount:at:)`` requires; the call may be made again in the same transaction when the
    /// backend runs one write transaction at a time (``FeedBackendTraits/concurrentWriteTransactions`` is 1).
    ///
    /// SQLite applies the commands one statement at a time on its single writer; PostgreSQL applies the whole call
    /// in one statement (one round trip), locking the posts in key order before any like so that calls never
    /// deadlock.
    func applyLikes(_ units: [LikeUnit]) throws -> [Result<[LikeOutcome], StorageError>]
    /// Events with `seq > after`, in order, up to `limit` (all when `nil`).
    func events(after seq: Int64, limit: Int?) throws -> [EventRecord]
    /// The last seq ever assigned (0 when none), pruned events included.
    func lastSeq() throws -> Int64
    /// How far the log can replay the tables (pruning and bulk loads).
    func replayBaseline() throws -> ReplayBaseline

    // MARK: Durable subscribers

    /// A subscriber's stored position, or `nil` when it never stored one.
    ///
    /// In a write transaction it also makes every other write transaction that asks for the same subscriber's
    /// position wait until this one ends, so two instances under one name never apply the same events (SQLite: the
    /// single writer; PostgreSQL: a transaction-scoped advisory lock on the name).
    func subscriberPosition(for name: String) throws -> SubscriberPosition?
    /// Moves a subscriber's cursor forward to `seq` (never back); returns the cursor after the call.
    func advanceSubscriberCursor(_ seq: Int64, for name: String, at time: Date) throws -> Int64
    /// Records a rebuild: the subscriber's state reflects the tables as of `seq` and the bulk loads through
    /// `bulkGeneration`.
    func markSubscriberRebuilt(_ name: String, through seq: Int64, bulkGeneration: Int64, at time: Date) throws

    /// Runs `body` inside a savepoint: when it throws, only its changes are rolled back and the error is rethrown;
    /// the transaction goes on.
    func savepoint<T>(_ body: () throws -> T) throws -> T
}

/// Whose feed page: nobody's, or a user's known by key (cached) or by id.
package enum FeedViewer: Sendable, Hashable {
    /// No viewer: every post shows as not liked.
    case anonymous
    /// A user whose key is known.
    case key(Int64)
    /// A user known by id, looked up with the page.
    case id(String)
}

/// Row counts of a FeedSync database.
public struct FeedCounts: Sendable, Hashable, Codable {
    /// Rows in each table.
    public let users: Int, posts: Int, likes: Int, events: Int

    /// Counts from their parts.
    public init(users: Int, posts: Int, likes: Int, events: Int) {
        self.users = users
        self.posts = posts
        self.likes = likes
        self.events = events
    }
}
