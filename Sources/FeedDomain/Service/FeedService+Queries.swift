public import FeedCore
internal import Foundation

extension FeedService {
    /// One page of the feed, newest first, with like counts and which posts the viewer likes.
    ///
    /// ```swift
    /// let first = try service.feedPage(viewerID: "user1", limit: 20)
    /// let next = try service.feedPage(viewerID: "user1", before: first.nextCursor, limit: 20)
    /// ```
    ///
    /// - Parameters:
    ///   - viewerID: the viewer, or `nil` for an anonymous feed.
    ///   - cursor: continue after this position (from a previous page's `nextCursor`); `nil` for the newest.
    ///   - limit: 1 to ``maximumPageSize``.
    /// - Throws: ``FeedError/invalidLimit(_:maximum:)``, ``FeedError/userNotFound(_:)``.
    /// - Complexity: O(limit · log n): an index seek, no scan.
    public func feedPage(viewerID: String?, before cursor: FeedCursor? = nil, limit: Int = 20) throws(FeedError) -> FeedPage {
        let started = ContinuousClock.now
        defer { noteQuery(#function, since: started) }
        try checkOpen()
        guard (1...Self.maximumPageSize).contains(limit) else { throw FeedError.invalidLimit(limit, maximum: Self.maximumPageSize) }
        if let viewerID { try validateID(viewerID, field: "user id") }
        do {
            return try backend.readOnce { tx in
                // One statement: autocommit gives it one consistent snapshot. A viewer whose key is not cached yet
                // is looked up in the page's statement where the backend can (PostgreSQL: one round trip).
                let viewer: FeedViewer =
                    switch (viewerID, viewerID.flatMap(cachedViewerKey)) {
                    case (nil, _): .anonymous
                    case (_, let key?): .key(key)
                    case (let viewerID?, nil): .id(viewerID)
                    }
                let (viewerKey, rows) = try tx.feedPage(for: viewer, before: cursor, limit: limit)
                if case .id(let viewerID) = viewer, let viewerKey { rememberViewerKey(viewerKey, for: viewerID) }
                let next = rows.count == limit ? rows.last.map { FeedCursor(after: $0.post) } : nil
                return FeedPage(viewerID: viewerID, rows: rows, nextCursor: next)
            }
        } catch {
            throw FeedError.wrap(error, value: viewerID)
        }
    }

    /// A post as the viewer sees it: the detail view.
    ///
    /// - Throws: ``FeedError/postNotFound(_:)``, ``FeedError/userNotFound(_:)``.
    public func post(id: String, viewerID: String?) throws(FeedError) -> PostDetail {
        let started = ContinuousClock.now
        defer { noteQuery(#function, since: started) }
        try checkOpen()
        try validateID(id, field: "post id")
        if let viewerID { try validateID(viewerID, field: "user id") }
        do {
            return try backend.read { tx in
                guard let post = try tx.post(id: id) else { throw FeedError.postNotFound(id) }
                guard let viewerID else { return PostDetail(post: post, liked: false) }
                let viewer = try viewerKey(viewerID, tx: tx)
                return PostDetail(post: post, liked: try tx.likeExists(userKey: viewer, postKey: post.sequence))
            }
        } catch {
            throw FeedError.wrap(error, value: id)
        }
    }

    /// The ids of every post the user likes.
    public func likedPostIDs(userID: String) throws(FeedError) -> Set<String> {
        let started = ContinuousClock.now
        defer { noteQuery(#function, since: started) }
        try checkOpen()
        try validateID(userID, field: "user id")
        do {
            return try backend.read { tx in try tx.likedPostIDs(userKey: try viewerKey(userID, tx: tx)) }
        } catch {
            throw FeedError.wrap(error, value: userID)
        }
    }

    /// Every user, ordered by id.
    public func users() throws(FeedError) -> [User] {
        let started = ContinuousClock.now
        defer { noteQuery(#function, since: started) }
        try checkOpen()
        do {
            return try backend.readOnce { tx in try tx.allUsers() }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Events with `seq > after`, in order, up to `limit` (all when `nil`).
    public func events(after seq: Int64 = 0, limit: Int? = nil) throws(FeedError) -> [EventRecord] {
        let started = ContinuousClock.now
        defer { noteQuery(#function, since: started) }
        try checkOpen()
        do {
            return try backend.readOnce { tx in try tx.events(after: seq, limit: limit) }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// The log's last seq (0 for an empty log).
    package func logHead() throws(FeedError) -> Int64 {
        try checkOpen()
        do {
            return try backend.readOnce { tx in try tx.lastSeq() }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// A summary of the database: schema versions, row counts and the last seq.
    public func status() throws(FeedError) -> FeedStatus {
        let started = ContinuousClock.now
        defer { noteQuery(#function, since: started) }
        try checkOpen()
        do {
            let schema = try backend.schemaStatus()
            return try backend.read { tx in
                let counts = try tx.maintenance.counts()
                let server = try tx.maintenance.server()
                return FeedStatus(
                    path: backend.traits.location, backend: backend.traits.name,
                    server: server?.address, primary: server?.isPrimary,
                    schemaVersion: schema.databaseVersion,
                    binarySchemaVersion: schema.binaryVersion,
                    pendingMigrations: schema.pending.count,
                    users: counts.users, posts: counts.posts, likes: counts.likes, events: counts.events,
                    lastSeq: try tx.lastSeq())
            }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Checks SQLite's integrity and FeedSync's invariants; empty when everything holds.
    public func check() throws(FeedError) -> [InvariantViolation] {
        let started = ContinuousClock.now
        defer { noteQuery(#function, since: started) }
        try checkOpen()
        do {
            return try backend.read { tx in try tx.maintenance.invariantViolations() }
        } catch {
            throw FeedError.wrap(error)
        }
    }
}

/// A summary of a FeedSync database.
public struct FeedStatus: Sendable, Hashable, Codable {
    /// Where the database is: the file's path, `:memory:`, or a PostgreSQL URL without its password.
    public let path: String
    /// Which backend serves it: `SQLite` or `PostgreSQL`.
    public let backend: String
    /// The PostgreSQL server the status was read from (`host:port`, one of a URL's several), `nil` for SQLite.
    public let server: String?
    /// Whether that server takes writes (`false`: a standby in recovery), `nil` for SQLite.
    public let primary: Bool?
    /// The database's schema version.
    public let schemaVersion: Int
    /// The newest schema version this binary knows.
    public let binarySchemaVersion: Int
    /// How many migrations the database still needs.
    public let pendingMigrations: Int
    /// Row counts.
    public let users: Int, posts: Int, likes: Int, events: Int
    /// The last event seq ever assigned (0 when none).
    public let lastSeq: Int64
}
