internal import FeedDependencies
public import FeedCore
internal import Foundation

/// The one public API for FeedSync's commands and queries; the CLI and library users both call it.
///
/// Commands are idempotent and transactional: a changing command writes its rows, the post's like count and exactly
/// one event row in one IMMEDIATE transaction; a command that changes nothing writes nothing and emits nothing. Events go out through ``bridge`` only after the commit, in seq order, and have
/// reached every subscriber by the time the command returns.
///
/// ```swift
/// let service = try FeedService(location: "/tmp/feed.sqlite")   // or "postgresql://app@db.example/feed"
/// try service.createUser(id: "user1")
/// let post = try service.createPost(id: "post1", authorID: "user1", body: "Hello")
/// let result = try service.like(userID: "user1", postID: post.id)   // result.changed == true
/// let again = try service.like(userID: "user1", postID: post.id)    // again.changed == false, seq == nil
/// ```
///
/// Time and generated ids come from the `date` and `uuid` dependencies captured when the service is created.
///
/// A service is open from its initializer until ``close()``. A server runs ``run()`` in a task for as long as it
/// serves — it keeps the watch of other processes' commits going — and cancels that task to shut down.
public final class FeedService: Sendable {
    /// The database: a ``FeedBackend`` (SQLite or PostgreSQL).
    package let backend: any FeedBackend
    /// Where committed changes are published.
    public let bridge: EventBridge
    /// The largest page a feed query returns.
    public static let maximumPageSize = 1000

    let date: DateGenerator
    let uuid: UUIDGenerator
    /// Viewers' integer keys by text id, on a backend that never reuses keys (PostgreSQL): a user's key never changes
    /// while the user exists, and an erased user's key is never given to another, so a cached key is at worst the key
    /// of nobody (this service's own erasures forget it). On SQLite a key is looked up each time, in the query's
    /// transaction. The cache is bounded and simply cleared when full.
    private let userKeys = Locked<[String: Int64]>([:])
    /// Whether ``userKeys`` is used: the backend never reuses a key.
    private let cachesViewerKeys: Bool
    private static let keyCacheLimit = 100_000
    /// Like commands from overlapping callers share one transaction.
    let group: GroupCommit
    /// The watch of other processes' commits that the service's change streams and ``run()`` share.
    let sharedWatch = SharedChangeWatch()
    /// How the service runs: the async API's thread pool, the logger, what counts as a slow command.
    public let configuration: Configuration
    /// The pool the async forms run on (``Configuration/blockingThreads``).
    let blockingPool: BlockingExecutor
    /// Open or closed, and the tasks waiting in ``run()``.
    let lifecycle = ServiceLifecycle()
    /// Set when the database is a replica: its commands then queue mutations for the source (`Docs/Replicas.md`).
    let replicaIdentity = Locked<ReplicaIdentity?>(nil)

    /// Creates a service over an open backend.
    ///
    /// `FeedService(location:)` (in the `FeedSync` module) opens a backend from a path or URL; this initializer
    /// takes one you opened yourself.
    ///
    /// - Parameters:
    ///   - backend: the database.
    ///   - bridge: where events go out; a new one by default.
    ///   - configuration: the async API's thread pool, the logger and the slow-command threshold.
    package init(
        backend: any FeedBackend, bridge: EventBridge = EventBridge(), configuration: Configuration = Configuration()
    ) throws(FeedError) {
        @Dependency(\.date) var date
        @Dependency(\.uuid) var uuid
        self.backend = backend
        cachesViewerKeys = !backend.traits.reusesKeys
        self.bridge = bridge
        self.configuration = configuration
        blockingPool = BlockingExecutor.pool(threads: configuration.blockingThreads)
        self.date = date
        self.uuid = uuid
        group = GroupCommit(backend: backend, sequencer: bridge.sequencer)
        do {
            let last = try backend.readOnce { tx in try tx.lastSeq() }
            bridge.sequencer.setBaseline(last)
            // A database of an older schema opened without migrating has no replica table: it is no replica.
            let identity = try? backend.readOnce { tx in try tx.replicaStore?.replicaIdentity() }
            replicaIdentity.withLock { $0 = identity ?? nil }
            attachDeliveryLog()
        } catch {
            throw FeedError.wrap(error)
        }
        if configuration.logger != nil {
            backend.notices.observe { [weak self] notice in
                self?.log(FeedLogEvent.Kind(rawValue: notice.kind.rawValue), .warning, notice.message, notice.fields)
            }
        }
    }

    // MARK: - Users and posts

    /// Creates a user.
    ///
    /// - Throws: ``FeedError/invalidValue(field:value:reason:)``, ``FeedError/userAlreadyExists(_:)``.
    @discardableResult
    public func createUser(id: String, name: String = "") throws(FeedError) -> User {
        try validateID(id, field: "user id")
        try validate(name, field: "user name", Validation.checkName)
        if replicaIdentity.withLock({ $0 }) != nil {
            throw FeedError.invalidValue(field: "user id", value: id, reason: "a replica cannot create users; create them on its source")
        }
        let now = date.now
        return try commit(value: id) { tx, events in
            let user = try tx.insertUser(id: id, name: name, at: now)
            events.append(try tx.appendEvent(kind: .userCreated, userID: id, postID: nil, likeCount: nil, at: now))
            return user
        }
    }

    /// Creates a post.
    ///
    /// - Parameters:
    ///   - id: the post's id; when `nil`, one is generated from the `uuid` dependency as `post-<uuid>` (lowercase).
    ///   - authorID: an existing user.
    ///   - body: 1 to 10,000 characters.
    /// - Throws: ``FeedError/invalidValue(field:value:reason:)``, ``FeedError/userNotFound(_:)``,
    ///   ``FeedError/postAlreadyExists(_:)``.
    @discardableResult
    public func createPost(id: String? = nil, authorID: String, body: String) throws(FeedError) -> Post {
        let postID = id ?? "post-" + uuid().uuidString.lowercased()
        try validateID(postID, field: "post id")
        try validateID(authorID, field: "author id")
        try validate(body, field: "post text", Validation.checkBody)
        let replica = try replicaActing(as: authorID)
        let now = date.now
        return try commit(value: postID) { tx, events in
            let post = try tx.insertPost(id: postID, authorID: authorID, body: body, at: now)
            events.append(try tx.appendEvent(kind: .postCreated, userID: authorID, postID: postID, likeCount: nil, at: now))
            if let replica { try ReplicaTables(tx, identity: replica, now: now).enqueue(.createPost, postID: postID, body: body) }
            return post
        }
    }

    // MARK: - Likes

    /// Likes a post; liking a liked post changes nothing (`changed == false`, `seq == nil`).
    ///
    /// - Throws: ``FeedError/userNotFound(_:)``, ``FeedError/postNotFound(_:)``, ``FeedError/invalidValue(field:value:reason:)``.
    @discardableResult
    public func like(userID: String, postID: String) throws(FeedError) -> LikeResult {
        try perform([LikeCommand(.like, userID: userID, postID: postID)])[0]
    }

    /// Takes a like back; unliking an unliked post changes nothing.
    @discardableResult
    public func unlike(userID: String, postID: String) throws(FeedError) -> LikeResult {
        try perform([LikeCommand(.unlike, userID: userID, postID: postID)])[0]
    }

    /// Likes the post when the user does not like it yet, unlikes it otherwise.
    @discardableResult
    public func toggle(userID: String, postID: String) throws(FeedError) -> LikeResult {
        try perform([LikeCommand(.toggle, userID: userID, postID: postID)])[0]
    }

    /// Runs several like commands in one transaction: all commit or none does; events go out after the commit.
    ///
    /// Commands from callers on other threads that overlap this call may share its transaction (group commit);
    /// each caller's commands still commit or fail together, and a failure in one caller's commands fails only
    /// that caller. The call returns once the transaction holding its commands committed; its events reach the
    /// bridge's subscribers afterwards, each on its own queue (``waitForDelivery(through:timeout:)-43d7m``).
    ///
    /// - Returns: one result per command, in order.
    public func perform(_ commands: [LikeCommand]) throws(FeedError) -> [LikeResult] {
        try checkOpen()
        let started = ContinuousClock.now
        defer { noteCommand(commands.count == 1 ? "\(commands[0].action)" : "perform", commands: commands.count, since: started) }
        for command in commands {
            try validateID(command.userID, field: "user id")
            try validateID(command.postID, field: "post id")
        }
        guard !commands.isEmpty else { return [] }
        if let replica = replicaIdentity.withLock({ $0 }) { return try performOnReplica(commands, replica: replica) }
        let unit = group.run(commands, now: date.now)
        switch unit.outcome {
        case .success(let results):
            return results
        case .failure(let error):
            throw error
        case nil:
            preconditionFailure("GroupCommit returned a unit without an outcome")
        }
    }

    // MARK: - Internals

    /// Runs `body` in a write transaction and hands the events it appended to the delivery executor (other
    /// processes' events committed before them are delivered first); returns once it committed.
    ///
    /// The committed events are handed to the sequencer while the writer connection is still held where the backend
    /// allows (SQLite), so local ranges reach it in commit order; a failed `COMMIT` hands over nothing. The call never
    /// waits for delivery.
    func commit<T>(
        value: String?, command: String = #function, _ body: (any FeedTransaction, inout [EventRecord]) throws -> T
    ) throws(FeedError) -> T {
        try checkOpen()
        let started = ContinuousClock.now
        defer { noteCommand(command, commands: 1, since: started) }
        let sequencer = bridge.sequencer
        let epoch = sequencer.epoch
        let result: T
        do {
            // The body may run more than once (a backend retries serialization failures): its events start empty
            // on every attempt.
            result = try backend.write(
                { tx -> (value: T, events: [EventRecord]) in
                    var events: [EventRecord] = []
                    let value = try body(tx, &events)
                    return (value, events)
                },
                afterCommit: { committed in sequencer.submitCommitted(committed.events, epoch: epoch) }
            ).value
        } catch {
            throw FeedError.wrap(error, value: value)
        }
        return result
    }

    func validateID(_ id: String, field: String) throws(FeedError) {
        try validate(id, field: field) { value throws(StorageError) in try Validation.checkID(value, field: field) }
    }

    func validate(_ value: String, field: String, _ check: (String) throws(StorageError) -> Void) throws(FeedError) {
        do {
            try check(value)
        } catch {
            if case .constraintViolation(_, let reason) = error {
                throw FeedError.invalidValue(field: field, value: value, reason: reason)
            }
            throw FeedError.storage(error)
        }
    }

    /// The viewer's key if it is cached.
    func cachedViewerKey(_ viewerID: String) -> Int64? {
        guard cachesViewerKeys else { return nil }
        return userKeys.withLock { $0[viewerID] }
    }

    /// Caches a viewer's key.
    func rememberViewerKey(_ key: Int64, for viewerID: String) {
        guard cachesViewerKeys else { return }
        Self.remember(key, for: viewerID, in: userKeys)
    }

    /// Forgets an erased user's key.
    func forgetViewerKey(_ viewerID: String) {
        _ = userKeys.withLock { $0.removeValue(forKey: viewerID) }
    }

    /// The integer key of a viewer, cached where ``cachesViewerKeys``.
    func viewerKey(_ viewerID: String, tx: any FeedTransaction) throws -> Int64 {
        if let key = cachedViewerKey(viewerID) { return key }
        guard let key = try tx.userKey(for: viewerID) else { throw FeedError.userNotFound(viewerID) }
        rememberViewerKey(key, for: viewerID)
        return key
    }

    private static func remember(_ key: Int64, for id: String, in cache: Locked<[String: Int64]>) {
        cache.withLock { keys in
            if keys.count >= keyCacheLimit { keys.removeAll(keepingCapacity: true) }
            keys[id] = key
        }
    }
}
