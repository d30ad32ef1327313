// The one import of the domain's models in the async API's overloads (they move to `FeedCore`).
public import FeedCore
public import Foundation

/// The async API: every command and query of ``FeedService`` as an `async` overload with the same name, labels and
/// errors.
///
/// Swift picks these overloads in an async context and the synchronous ones elsewhere. Each runs the synchronous
/// call on a small pool of dedicated threads (``FeedService/Configuration/blockingThreads``, 8 by default, see
/// `Docs/Domain.md`, "Async API and change streams") and suspends the calling task until it finished: a database wait
/// parks a pool thread, never a thread of Swift's cooperative pool. The pool threads hold no role of the threading
/// contract.
///
/// Cancellation is honoured before a call starts: from a task already cancelled, or cancelled while the call waits
/// for a pool thread, it throws ``FeedError/cancelled`` and reads and writes nothing. A call that started is not
/// stopped: a command runs to its `COMMIT` (or fails as a whole) and the task receives its result.
extension FeedService {
    /// Runs `body` on the service's pool, honouring cancellation before it starts.
    func onPool<T: Sendable>(_ body: @escaping @Sendable () throws(FeedError) -> T) async throws(FeedError) -> T {
        try await blockingPool.run(body)
    }

    // MARK: - Commands

    /// Creates a user, without blocking the calling task's thread.
    ///
    /// The async form of ``createUser(id:name:)``: same result, same errors.
    ///
    /// ```swift
    /// let user = try await service.createUser(id: "user1", name: "Ada")
    /// ```
    @discardableResult
    public func createUser(id: String, name: String = "") async throws(FeedError) -> User {
        try await onPool { () throws(FeedError) in try self.createUser(id: id, name: name) }
    }

    /// Creates a post, without blocking the calling task's thread.
    ///
    /// The async form of ``createPost(id:authorID:body:)``: same result, same errors.
    ///
    /// ```swift
    /// let post = try await service.createPost(id: "post1", authorID: "user1", body: "Hello")
    /// ```
    @discardableResult
    public func createPost(id: String? = nil, authorID: String, body: String) async throws(FeedError) -> Post {
        try await onPool { () throws(FeedError) in
            try self.createPost(id: id, authorID: authorID, body: body)
        }
    }

    /// Likes a post, without blocking the calling task's thread.
    ///
    /// The async form of ``like(userID:postID:)``: idempotent, returns after the event was delivered.
    ///
    /// ```swift
    /// let result = try await service.like(userID: "user1", postID: "post1")   // result.changed == true
    /// ```
    @discardableResult
    public func like(userID: String, postID: String) async throws(FeedError) -> LikeResult {
        try await onPool { () throws(FeedError) in try self.like(userID: userID, postID: postID) }
    }

    /// Takes a like back, without blocking the calling task's thread.
    ///
    /// The async form of ``unlike(userID:postID:)``.
    @discardableResult
    public func unlike(userID: String, postID: String) async throws(FeedError) -> LikeResult {
        try await onPool { () throws(FeedError) in try self.unlike(userID: userID, postID: postID) }
    }

    /// Deletes a post, without blocking the calling task's thread.
    ///
    /// The async form of ``deletePost(postID:by:)``: idempotent; only its author (or the operator, `nil`) may.
    @discardableResult
    public func deletePost(postID: String, by actor: String?) async throws(FeedError) -> PostDeletion {
        try await onPool { () throws(FeedError) in try self.deletePost(postID: postID, by: actor) }
    }

    /// Erases a user, without blocking the calling task's thread.
    ///
    /// The async form of ``deleteUser(userID:)``.
    @discardableResult
    public func deleteUser(userID: String) async throws(FeedError) -> UserErasure {
        try await onPool { () throws(FeedError) in try self.deleteUser(userID: userID) }
    }

    /// Likes or unlikes a post, whichever changes it, without blocking the calling task's thread.
    ///
    /// The async form of ``toggle(userID:postID:)``.
    @discardableResult
    public func toggle(userID: String, postID: String) async throws(FeedError) -> LikeResult {
        try await onPool { () throws(FeedError) in try self.toggle(userID: userID, postID: postID) }
    }

    /// Runs several like commands in one transaction, without blocking the calling task's thread.
    ///
    /// The async form of ``perform(_:)``: all commit or none does; overlapping callers may share a transaction.
    ///
    /// ```swift
    /// let results = try await service.perform([LikeCommand(.like, userID: "user1", postID: "post1")])
    /// ```
    public func perform(_ commands: [LikeCommand]) async throws(FeedError) -> [LikeResult] {
        try await onPool { () throws(FeedError) in try self.perform(commands) }
    }

    // MARK: - Queries

    /// One page of the feed, without blocking the calling task's thread.
    ///
    /// The async form of ``feedPage(viewerID:before:limit:)``; the page is `Codable`, ready for a JSON response.
    ///
    /// ```swift
    /// let page = try await service.feedPage(viewerID: "user1", limit: 20)
    /// let body = try JSONEncoder().encode(page)
    /// ```
    public func feedPage(viewerID: String?, before cursor: FeedCursor? = nil, limit: Int = 20) async throws(FeedError) -> FeedPage {
        try await onPool { () throws(FeedError) in
            try self.feedPage(viewerID: viewerID, before: cursor, limit: limit)
        }
    }

    /// A post as the viewer sees it, without blocking the calling task's thread.
    ///
    /// The async form of ``post(id:viewerID:)``.
    public func post(id: String, viewerID: String?) async throws(FeedError) -> PostDetail {
        try await onPool { () throws(FeedError) in try self.post(id: id, viewerID: viewerID) }
    }

    /// The ids of every post the user likes, without blocking the calling task's thread.
    ///
    /// The async form of ``likedPostIDs(userID:)``.
    public func likedPostIDs(userID: String) async throws(FeedError) -> Set<String> {
        try await onPool { () throws(FeedError) in try self.likedPostIDs(userID: userID) }
    }

    /// Every user, ordered by id, without blocking the calling task's thread.
    ///
    /// The async form of ``users()``.
    public func users() async throws(FeedError) -> [User] {
        try await onPool { () throws(FeedError) in try self.users() }
    }

    /// Events with `seq > after`, in order, up to `limit`, without blocking the calling task's thread.
    ///
    /// The async form of ``events(after:limit:)``. To follow the log as it grows, use ``changes(after:maximumBatch:)``.
    public func events(after seq: Int64 = 0, limit: Int? = nil) async throws(FeedError) -> [EventRecord] {
        try await onPool { () throws(FeedError) in try self.events(after: seq, limit: limit) }
    }

    /// A summary of the database, without blocking the calling task's thread.
    ///
    /// The async form of ``status()``.
    public func status() async throws(FeedError) -> FeedStatus {
        try await onPool { () throws(FeedError) in try self.status() }
    }

    /// Checks SQLite's integrity and FeedSync's invariants, without blocking the calling task's thread.
    ///
    /// The async form of ``check()``; empty when everything holds.
    public func check() async throws(FeedError) -> [InvariantViolation] {
        try await onPool { () throws(FeedError) in try self.check() }
    }

    // MARK: - Seeding, sync and retention

    /// Loads ``SeedPlan`` data into an empty database, without blocking the calling task's thread.
    ///
    /// The async form of ``seed(_:progress:)``. `progress` runs on the pool thread doing the load, hence `@Sendable`.
    ///
    /// ```swift
    /// let summary = try await service.seed(SeedPlan(posts: 1000, users: 100, likes: 5000))
    /// ```
    @discardableResult
    public func seed(
        _ plan: SeedPlan, progress: @escaping @Sendable (SeedProgress) -> Void = { _ in }
    ) async throws(FeedError) -> SeedSummary {
        try await onPool { () throws(FeedError) in try self.seed(plan, progress: progress) }
    }

    /// Waits, without blocking the calling task's thread, until every subscriber of ``bridge`` has been handed every
    /// event up to `seq` (see ``EventBridge/waitForDelivery(through:timeout:)``).
    ///
    /// - Returns: whether they had within `timeout` (from a cancelled task, at once: whether they had already).
    @discardableResult
    public func waitForDelivery(through seq: Int64, timeout: Duration = .seconds(10)) async -> Bool {
        let bridge = bridge
        let delivered = try? await onPool { () throws(FeedError) in
            bridge.waitForDelivery(through: seq, timeout: timeout)
        }
        return delivered ?? (bridge.lastDeliveredSeq >= seq)
    }

    /// Publishes every event committed since the last published one, by any process, without blocking the calling
    /// task's thread.
    ///
    /// The async form of ``publishCommittedEvents(batchSize:)``; returns how many events were published.
    @discardableResult
    public func publishCommittedEvents(batchSize: Int = 10_000) async throws(FeedError) -> Int {
        try await onPool { () throws(FeedError) in try self.publishCommittedEvents(batchSize: batchSize) }
    }

    /// Deletes events with `seq <= seq` from the log, without blocking the calling task's thread.
    ///
    /// The async form of ``pruneEvents(through:)``; returns the number of events deleted.
    @discardableResult
    public func pruneEvents(through seq: Int64) async throws(FeedError) -> Int {
        try await onPool { () throws(FeedError) in try self.pruneEvents(through: seq) }
    }

    /// Deletes events committed before `date` from the log, without blocking the calling task's thread.
    ///
    /// The async form of ``pruneEvents(olderThan:)``; returns the number of events deleted.
    @discardableResult
    public func pruneEvents(olderThan date: Date) async throws(FeedError) -> Int {
        try await onPool { () throws(FeedError) in try self.pruneEvents(olderThan: date) }
    }

    // MARK: - Tokens

    /// Issues a token for a user, without blocking the calling task's thread.
    ///
    /// The async form of ``issueToken(userID:label:)``: the text is returned once; the database keeps its hash.
    public func issueToken(userID: String, label: String = "") async throws(FeedError) -> IssuedToken {
        try await onPool { () throws(FeedError) in try self.issueToken(userID: userID, label: label) }
    }

    /// Every token, valid or revoked, without blocking the calling task's thread.
    ///
    /// The async form of ``tokens()``.
    public func tokens() async throws(FeedError) -> [TokenInfo] {
        try await onPool { () throws(FeedError) in try self.tokens() }
    }

    /// Revokes a token, without blocking the calling task's thread.
    ///
    /// The async form of ``revokeToken(id:)``: `false` when no token has this id or it was revoked already.
    @discardableResult
    public func revokeToken(id: String) async throws(FeedError) -> Bool {
        try await onPool { () throws(FeedError) in try self.revokeToken(id: id) }
    }

    /// The user a token acts as, without blocking the calling task's thread.
    ///
    /// The async form of ``authenticate(token:)``: `nil` for a malformed, unknown or revoked token. A malformed text
    /// is answered on the calling task, without a pool thread.
    public func authenticate(token: String) async throws(FeedError) -> String? {
        guard Self.tokenID(in: token) != nil else { return nil }
        return try await onPool { () throws(FeedError) in try self.authenticate(token: token) }
    }
}

extension FeedService {
    /// A replica's sync status, without blocking the calling task's thread: the async form of ``replicaStatus()-9h5rz``.
    public func replicaStatus() async throws(FeedError) -> ReplicaStatus? {
        try await blockingPool.run { () throws(FeedError) in try self.replicaStatus() }
    }
}
