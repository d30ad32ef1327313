public import FeedStorage
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
        guard (1...Self.maximumPageSize).contains(limit) else { throw FeedError.invalidLimit(limit, maximum: Self.maximumPageSize) }
        if let viewerID { try validateID(viewerID, field: "user id") }
        do {
            return try store.unsafeRead { db in
                let viewer = try viewerID.map { try viewerKey($0, db: db) }
                // One statement: autocommit gives it one consistent snapshot.
                let rows = try PostRepository(db).feedPage(viewerKey: viewer, before: cursor, limit: limit)
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
        try validateID(id, field: "post id")
        if let viewerID { try validateID(viewerID, field: "user id") }
        do {
            return try store.read { db in
                guard let post = try PostRepository(db).find(id) else { throw FeedError.postNotFound(id) }
                guard let viewerID else { return PostDetail(post: post, liked: false) }
                let viewer = try viewerKey(viewerID, db: db)
                return PostDetail(post: post, liked: try LikeRepository(db).exists(userKey: viewer, postKey: post.sequence))
            }
        } catch {
            throw FeedError.wrap(error, value: id)
        }
    }

    /// The ids of every post the user likes.
    public func likedPostIDs(userID: String) throws(FeedError) -> Set<String> {
        try validateID(userID, field: "user id")
        do {
            return try store.read { db in try LikeRepository(db).likedPostIDs(userKey: try viewerKey(userID, db: db)) }
        } catch {
            throw FeedError.wrap(error, value: userID)
        }
    }

    /// Every user, ordered by id.
    public func users() throws(FeedError) -> [User] {
        do {
            return try store.read { db in try UserRepository(db).all() }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Events with `seq > after`, in order, up to `limit` (all when `nil`).
    public func events(after seq: Int64 = 0, limit: Int? = nil) throws(FeedError) -> [EventRecord] {
        do {
            return try store.read { db in try EventLog(db).events(after: seq, limit: limit) }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// A summary of the database: schema versions, row counts and the last seq.
    public func status() throws(FeedError) -> FeedStatus {
        do {
            return try store.read { db in
                FeedStatus(
                    path: store.path,
                    schemaVersion: try store.migrator.currentVersion(db),
                    binarySchemaVersion: store.migrator.latestVersion,
                    pendingMigrations: try store.migrator.pendingMigrations(db).count,
                    users: try UserRepository(db).count(),
                    posts: try PostRepository(db).count(),
                    likes: try LikeRepository(db).count(),
                    events: try EventLog(db).count(),
                    lastSeq: try EventLog(db).lastSeq())
            }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Checks SQLite's integrity and FeedSync's invariants; empty when everything holds.
    public func check() throws(FeedError) -> [InvariantViolation] {
        do {
            return try store.read { db in try InvariantChecker(db).violations() }
        } catch {
            throw FeedError.wrap(error)
        }
    }
}

/// A summary of a FeedSync database.
public struct FeedStatus: Sendable, Hashable, Codable {
    /// The database file, or `nil` in memory.
    public let path: String?
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
