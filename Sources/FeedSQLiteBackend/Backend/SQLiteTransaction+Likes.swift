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

    /// The keys of a user and a post: from the store's cache; a key not cached is looked up alone (one index probe),
    /// both in one query when neither is — which also proves that they exist.
    private func cachedKeys(userID: String, postID: String) throws -> (user: Int64, post: Int64) {
        if let likeKeys, !likeKeysChecked {
            // Another process may have deleted a cached row (and SQLite may give its key to a new one): the counter
            // every deletion moves says whether the cache still holds.
            likeKeys.check(deletionEpoch: try connection.fetchInt64("SELECT epoch FROM deletions") ?? 0)
            likeKeysChecked = true
        }
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
/// lives, so a key read from a committed row stays true until the row is deleted: a deletion in this store forgets
/// it here, and one in any other process moves the database's deletion counter, which clears the cache at the next
/// write transaction that uses it. The caches are bounded and simply cleared when full.
///
/// `@unchecked Sendable`: the dictionaries and the epoch are read and written only while `lock` is held.
final class LikeKeyCache: @unchecked Sendable {
    private static let limit = 100_000
    private let lock = NSLock()
    private var users: [String: Int64] = [:]
    private var posts: [String: Int64] = [:]
    /// The deletion counter the cached keys were read under.
    private var epoch: Int64?

    /// Clears the cache when the database's deletion counter moved since the keys were read; called inside a write
    /// transaction, which no deletion can interleave with.
    func check(deletionEpoch: Int64) {
        lock.lock()
        defer { lock.unlock() }
        guard epoch != deletionEpoch else { return }
        users.removeAll(keepingCapacity: true)
        posts.removeAll(keepingCapacity: true)
        epoch = deletionEpoch
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
