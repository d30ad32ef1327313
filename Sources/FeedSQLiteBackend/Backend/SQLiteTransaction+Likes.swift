package import FeedCore
internal import FeedSQLite
internal import Foundation

extension SQLiteTransaction {
    /// Applies the units one statement at a time on the writer connection: every unit's keys first (from
    /// ``LikeKeyCache`` or one index probe), so an unknown user or post rejects the unit before it writes; then each
    /// command's like row and the post's count, and its event carrying the count after the change, appended at once —
    /// the transaction holds SQLite's only write lock, so there is no lock order to keep.
    package func applyLikes(_ units: [LikeUnit]) throws -> [Result<[LikeOutcome], StorageError>] {
        let likes = LikeRepository(connection)
        let log = EventLog(connection)
        var outcomes: [Result<[LikeOutcome], StorageError>] = []
        outcomes.reserveCapacity(units.count)
        try revalidateLikeKeys()
        for unit in units {
            var keys: [(user: Int64, post: Int64)] = []
            keys.reserveCapacity(unit.operations.count)
            do {
                for command in unit.operations {
                    keys.append(try cachedKeys(userID: command.userID, postID: command.postID))
                }
            } catch let error as StorageError {
                switch error {
                case .userNotFound, .postNotFound:
                    outcomes.append(.failure(error))
                    continue
                default:
                    throw error
                }
            }
            var list: [LikeOutcome] = []
            list.reserveCapacity(unit.operations.count)
            for (command, key) in zip(unit.operations, keys) {
                let change: EventKind?
                switch command.action {
                case .like:
                    change = try likes.insert(userKey: key.user, postKey: key.post, at: unit.at) ? .liked : nil
                case .unlike:
                    change = try likes.delete(userKey: key.user, postKey: key.post) ? .unliked : nil
                case .toggle:
                    // Insert first: a toggle is most often a like (a post the user has not liked yet), which then
                    // costs one statement; a like that exists is not inserted, and the toggle takes it back.
                    if try likes.insert(userKey: key.user, postKey: key.post, at: unit.at) {
                        change = .liked
                    } else {
                        _ = try likes.delete(userKey: key.user, postKey: key.post)
                        change = .unliked
                    }
                }
                if let change {
                    // The event reads the post's count in the same statement that appends it.
                    let event = try log.appendLikeChange(
                        change, userID: command.userID, postID: command.postID, postKey: key.post, at: unit.at)
                    list.append(LikeOutcome(liked: change == .liked, likeCount: event.likeCount ?? 0, event: event))
                } else {
                    guard let count = try PostRepository(connection).likeCount(postKey: key.post) else {
                        throw StorageError.postNotFound(command.postID)
                    }
                    list.append(LikeOutcome(liked: command.action == .like, likeCount: count, event: nil))
                }
            }
            outcomes.append(.success(list))
        }
        return outcomes
    }

    /// Clears the store's key cache when a post was deleted or a user erased since it was last checked — by another
    /// process, or another store on the same file, whose deletions this store's cache never heard of: a cached key
    /// could then name a row that is gone, or a row created since under the same key (a key is reused once the
    /// highest one is deleted). The log says so: a `postDeleted` or `userDeleted` event after the seq the cache was
    /// checked through, or events pruned past it. Only the events appended since the last check are read.
    private func revalidateLikeKeys() throws {
        guard let likeKeys else { return }
        let checked = likeKeys.checkedThrough
        let state = try connection.fetchOne(
            """
            SELECT coalesce(max(seq), 0), coalesce(min(seq), 0),
                   EXISTS (SELECT 1 FROM events WHERE seq > ?1 AND (kind = 'postDeleted' OR kind = 'userDeleted'))
            FROM events
            """, checked ?? 0
        ) { row in (last: row.int64(at: 0), first: row.int64(at: 1), deletions: row.int64(at: 2) == 1) }
        guard let state else { return }
        let through = checked ?? -1
        if through < 0 || state.deletions || state.first > through + 1 || state.last < through { likeKeys.clear() }
        likeKeys.checkedThrough = state.last
    }

    /// The keys of a user and a post: from the store's cache; a key not cached is looked up alone (one index probe),
    /// both in one query when neither is — which also proves that they exist.
    private func cachedKeys(userID: String, postID: String) throws -> (user: Int64, post: Int64) {
        let cached = likeKeys?.keys(userID: userID, postID: postID) ?? (nil, nil)
        switch cached {
        case (let user?, let post?):
            return (user, post)
        case (let user?, nil):
            guard let post = try PostRepository(connection).key(for: postID) else { throw StorageError.postNotFound(postID) }
            likeKeys?.remember(post: post, for: postID)
            return (user, post)
        case (nil, let post?):
            guard let user = try UserRepository(connection).key(for: userID) else { throw StorageError.userNotFound(userID) }
            likeKeys?.remember(user: user, for: userID)
            return (user, post)
        case (nil, nil):
            let keys = try LikeRepository(connection).keys(userID: userID, postID: postID)
            likeKeys?.remember(user: keys.user, for: userID)
            likeKeys?.remember(post: keys.post, for: postID)
            return keys
        }
    }
}

/// Integer keys of users and posts by text id, for the like commands of one store. A key never changes while its row
/// lives, so a key read from a committed row stays true until the row is deleted: this store's deletions forget it
/// here, and another's clear the cache at the next like transaction (the log shows their events); the caches are
/// bounded and simply cleared when full.
///
/// `@unchecked Sendable`: both dictionaries are read and written only while `lock` is held.
final class LikeKeyCache: @unchecked Sendable {
    private static let limit = 100_000
    private let lock = NSLock()
    private var users: [String: Int64] = [:]
    private var posts: [String: Int64] = [:]
    private var checkedSeq: Int64?

    /// The log's last seq when the keys were last checked against its deletions; `nil` before the first check.
    /// Read and written by write transactions, which the store runs one at a time.
    var checkedThrough: Int64? {
        get {
            lock.lock()
            defer { lock.unlock() }
            return checkedSeq
        }
        set {
            lock.lock()
            defer { lock.unlock() }
            checkedSeq = newValue
        }
    }

    /// Forgets every key.
    func clear() {
        lock.lock()
        defer { lock.unlock() }
        users.removeAll(keepingCapacity: true)
        posts.removeAll(keepingCapacity: true)
    }

    func keys(userID: String, postID: String) -> (user: Int64?, post: Int64?) {
        lock.lock()
        defer { lock.unlock() }
        return (users[userID], posts[postID])
    }

    func remember(user key: Int64, for id: String) {
        lock.lock()
        defer { lock.unlock() }
        if users.count >= Self.limit { users.removeAll(keepingCapacity: true) }
        users[id] = key
    }

    /// Forgets the keys of a deleted post or erased user.
    func forget(postIDs: [String] = [], userID: String? = nil) {
        lock.lock()
        defer { lock.unlock() }
        for id in postIDs { posts[id] = nil }
        if let userID { users[userID] = nil }
    }

    func remember(post key: Int64, for id: String) {
        lock.lock()
        defer { lock.unlock() }
        if posts.count >= Self.limit { posts.removeAll(keepingCapacity: true) }
        posts[id] = key
    }
}
