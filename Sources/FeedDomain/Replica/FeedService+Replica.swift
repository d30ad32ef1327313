internal import FeedCore
internal import FeedDependencies
public import Foundation

/// A replica's side: local commands that queue mutations, the steps a sync applies, and the replica's status.
extension FeedService {
    /// What a replica database says about its sync: `nil` for a database that is not a replica.
    ///
    /// - Throws: ``FeedError`` when the database cannot be read.
    public func replicaStatus() throws(FeedError) -> ReplicaStatus? {
        try checkOpen()
        guard let identity = replicaIdentity.withLock({ $0 }) else { return nil }
        do {
            return try backend.read { tx in
                let progress = try ReplicaTables(tx, identity: identity, now: date.now).store.replicaProgress(recentRejections: 20)
                return ReplicaStatus(
                    replicaOf: Self.redacted(identity.source), user: identity.userID, clientID: identity.clientID,
                    pendingChanges: progress.pending, rejectedChanges: progress.rejected, lastSyncedSeq: progress.cursor.syncedSeq ?? 0,
                    lastSyncAt: progress.lastSyncAt, lastError: progress.lastError,
                    recentRejections: progress.recentRejections.map { SyncRejection(number: $0.number, reason: $0.reason) })
            }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Where this replica syncs from (with any password, to connect), as whom, under which client id; `nil` for a
    /// database that is not a replica.
    package var replicaLink: (source: String, userID: String, clientID: String)? {
        replicaIdentity.withLock { $0 }.map { ($0.source, $0.userID, $0.clientID) }
    }

    /// Makes this empty database a replica of `source` for `userID`; the first sync fills it with a snapshot.
    ///
    /// - Throws: ``FeedError/invalidValue(field:value:reason:)`` when the database has data or is a replica already.
    package func makeReplica(of source: String, userID: String, clientID: String) throws(FeedError) {
        try validateID(userID, field: "user id")
        try validateID(clientID, field: "client id")
        try checkOpen()
        guard replicaIdentity.withLock({ $0 }) == nil else {
            throw FeedError.invalidValue(field: "database", value: backend.traits.location, reason: "it is a replica already")
        }
        let identity = ReplicaIdentity(source: source, userID: userID, clientID: clientID)
        _ = try commit(value: nil, command: "replica init") { tx, _ in
            try ReplicaTables(tx, identity: identity, now: date.now).store.startReplica(identity)
        }
        replicaIdentity.withLock { $0 = identity }
    }

    /// The replica's identity when the database is one, after checking that `userID` is its user.
    func replicaActing(as userID: String) throws(FeedError) -> ReplicaIdentity? {
        guard let identity = replicaIdentity.withLock({ $0 }) else { return nil }
        guard identity.userID == userID else {
            throw FeedError.invalidValue(
                field: "user id", value: userID, reason: "this replica acts only as \(FeedError.quoted(identity.userID))")
        }
        return identity
    }

    /// Like commands on a replica: applied locally at once, each queued as intent in the same transaction.
    func performOnReplica(_ commands: [LikeCommand], replica: ReplicaIdentity) throws(FeedError) -> [LikeResult] {
        for command in commands { _ = try replicaActing(as: command.userID) }
        let now = date.now
        return try commit(value: commands.count == 1 ? commands[0].postID : nil, command: "perform") { tx, events in
            let tables = try ReplicaTables(tx, identity: replica, now: now)
            for command in commands { try tables.keepBase(of: command.postID) }
            let outcomes: [LikeOutcome]
            switch try tx.applyLikes([LikeUnit(operations: commands, at: now)])[0] {
            case .success(let list): outcomes = list
            case .failure(let error): throw error
            }
            var results: [LikeResult] = []
            for (command, outcome) in zip(commands, outcomes) {
                if let event = outcome.event { events.append(event) }
                try tables.enqueue(outcome.liked ? .like : .unlike, postID: command.postID)
                results.append(
                    LikeResult(
                        postID: command.postID, userID: command.userID, liked: outcome.liked, likeCount: outcome.likeCount,
                        changed: outcome.event != nil, seq: outcome.event?.seq))
            }
            return results
        }
    }

    // MARK: - Steps of a sync

    /// The pending mutations not yet acknowledged, oldest first, and the replica's cursor.
    func replicaOutbox(limit: Int) throws(FeedError) -> (identity: ReplicaIdentity, cursor: ReplicaCursor, mutations: [SyncMutation]) {
        try checkOpen()
        guard let identity = replicaIdentity.withLock({ $0 }) else {
            throw FeedError.invalidValue(field: "database", value: backend.traits.location, reason: "not a replica")
        }
        do {
            return try backend.read { tx in
                let tables = try ReplicaTables(tx, identity: identity, now: date.now)
                let cursor = try tables.store.replicaCursor()
                return (identity, cursor, try tables.pending(after: cursor.pushedThrough, limit: limit))
            }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Applies a push's answer: rejected mutations leave the queue's pending part, and later pushes start after the
    /// acknowledged number.
    func applyPushResponse(_ response: PushResponse, identity: ReplicaIdentity) throws(FeedError) {
        let now = date.now
        _ = try commit(value: nil, command: "sync push") { tx, events in
            let tables = try ReplicaTables(tx, identity: identity, now: now)
            events += try tables.reject(response.rejected)
            try tables.store.recordPush(through: response.lastMutation)
        }
    }

    /// Applies one pull step in one transaction: the source's changes (or snapshot page, asked from `requested`, after
    /// the previous page's `boundary`), the cursor, and the queue's confirmed mutations leave it.
    ///
    /// - Returns: `applied == false` when the replica's cursor moved since the pull was asked (another sync applied a
    ///   step meanwhile): nothing was applied. A snapshot page that is not the last returns its boundary.
    func applyPullStep(
        _ response: PullResponse, after cursor: Int64?, requested: SyncSnapshotPosition?, boundary: SnapshotBoundary?,
        identity: ReplicaIdentity
    ) throws(FeedError) -> (applied: Bool, boundary: SnapshotBoundary?) {
        let now = date.now
        return try commit(value: nil, command: "sync pull") { tx, events in
            let tables = try ReplicaTables(tx, identity: identity, now: now)
            guard try tables.store.replicaCursor().syncedSeq == cursor else { return (false, nil) }
            var handed: SnapshotBoundary?
            if let snapshot = response.snapshot {
                for user in snapshot.users { events += try tables.addUser(id: user.id, name: user.name, createdAt: user.createdAt) }
                for post in snapshot.posts {
                    events += try tables.addPost(id: post.id, authorID: post.authorID, body: post.body, createdAt: post.createdAt)
                    events += try tables.reconcile(post.id, confirmedLiked: post.liked, confirmedCount: post.likeCount)
                }
                let dropped = try tables.dropMissing(from: snapshot, requested: requested, next: response.nextSnapshot, boundary: boundary)
                events += dropped.events
                handed = dropped.boundary
            }
            // Users and posts in order; then each touched post once, with the last state the step confirms for it
            // (a step is one consistent state of the source, so the changes in between need not be shown one by one).
            var confirmed: [String: (liked: Bool?, count: Int?)] = [:]
            var touched: [String] = []
            for change in response.changes {
                switch change.kind {
                case .user:
                    events += try tables.addUser(id: change.userID ?? "", name: change.name ?? "", createdAt: change.at)
                case .post:
                    events += try tables.addPost(
                        id: change.postID ?? "", authorID: change.userID ?? "", body: change.body ?? "", createdAt: change.at)
                case .like, .likeCount:
                    let postID = change.postID ?? ""
                    let before = confirmed[postID]
                    if before == nil { touched.append(postID) }
                    confirmed[postID] = (change.liked ?? before?.liked, change.likeCount ?? before?.count)
                case .postDeleted:
                    let postID = change.postID ?? ""
                    events += try tables.deletePost(postID)
                    if confirmed.removeValue(forKey: postID) != nil { touched.removeAll { $0 == postID } }
                }
            }
            for postID in touched {
                let state = confirmed[postID]
                events += try tables.reconcile(postID, confirmedLiked: state?.liked, confirmedCount: state?.count)
            }
            // A snapshot page that is not the last leaves the cursor (and the queue) as they were.
            if response.nextSnapshot != nil { return (true, handed) }
            if let number = response.lastMutation { events += try tables.confirm(through: number) }
            try tables.store.recordPull(
                through: response.through, check: response.throughCheck, bulkGeneration: response.bulkGeneration, at: now)
            return (true, nil)
        }
    }

    /// The replica's own last seq (its local log, not the source's).
    func lastLocalSeq() throws(FeedError) -> Int64 {
        do {
            return try backend.readOnce { tx in try tx.lastSeq() }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Records why the last sync failed (shown by ``replicaStatus()``), or clears it.
    func recordSyncError(_ message: String?) {
        _ = try? backend.write(
            { tx in try tx.replicaStore?.recordSyncError(message) },
            afterCommit: { _ in })
    }

    /// A location without its password, in the authority or as a `password=` parameter:
    /// `postgresql://app:secret@db/feed` and `postgresql://app@db/feed?password=secret` → `postgresql://app@db/feed`.
    static func redacted(_ location: String) -> String {
        guard var components = URLComponents(string: location), components.scheme != nil else { return location }
        let items = components.queryItems ?? []
        let kept = items.filter { $0.name.lowercased() != "password" }
        guard components.password != nil || kept.count != items.count else { return location }
        components.password = nil
        if kept.count != items.count { components.queryItems = kept.isEmpty ? nil : kept }
        return components.string ?? location
    }
}

/// Where a replica stands: what ``FeedService/replicaStatus()-9h5rz`` returns and `feedsync status` prints.
public struct ReplicaStatus: Sendable, Hashable, Codable {
    /// The source's location, without its password.
    public let replicaOf: String
    /// The user the replica acts as.
    public let user: String
    /// The replica's client id at the source.
    public let clientID: String
    /// Local writes the source has not confirmed yet.
    public let pendingChanges: Int
    /// Local writes the source refused for good.
    public let rejectedChanges: Int
    /// The source seq the replica's state reflects (0 before the first sync).
    public let lastSyncedSeq: Int64
    /// When the last pull completed.
    public let lastSyncAt: Date?
    /// Why the last sync failed, or `nil` when it succeeded.
    public let lastError: String?
    /// The latest refusals, newest first (at most 20).
    public let recentRejections: [SyncRejection]
}
