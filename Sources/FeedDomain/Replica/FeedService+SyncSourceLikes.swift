internal import FeedCore
internal import Foundation

extension FeedService {
    /// Applies a push's likes and unlikes as one unit (one statement on PostgreSQL); a mutation on a post that does
    /// not exist — never created, or deleted — joins `rejected` and never blocks the others.
    ///
    /// A post found here may still be deleted before the unit runs (on PostgreSQL, by a transaction that committed
    /// in between): the unit then fails with `postNotFound` inside its savepoint, that post's mutations are rejected
    /// too, and the rest is applied again — at most once per post. `ReplicaDeletionTests` races the two.
    static func applyPushedLikes(
        _ mutations: [SyncMutation], userID: String, at now: Date, in tx: any FeedTransaction,
        rejecting rejected: inout [(Int64, String)]
    ) throws -> [EventRecord] {
        let known = try tx.syncSource.existingPostIDs(mutations.map(\.postID))
        var pending = mutations.filter { known.contains($0.postID) }
        var gone = Set(mutations.map(\.postID)).subtracting(known)
        var events: [EventRecord] = []
        while !pending.isEmpty {
            let operations = pending.map { LikeCommand($0.kind == .like ? .like : .unlike, userID: userID, postID: $0.postID) }
            // One unit's failure is thrown on PostgreSQL and returned on SQLite; the savepoint undoes its part.
            let result: Result<[LikeOutcome], StorageError>
            do {
                result = try tx.savepoint { try tx.applyLikes([LikeUnit(operations: operations, at: now)])[0] }
            } catch let error as StorageError {
                result = .failure(error)
            }
            switch result {
            case .success(let outcomes):
                events = outcomes.compactMap(\.event)
                pending = []
            case .failure(.postNotFound(let postID)) where pending.contains(where: { $0.postID == postID }):
                gone.insert(postID)
                pending.removeAll { $0.postID == postID }
            case .failure(let error):
                throw error
            }
        }
        for mutation in mutations where gone.contains(mutation.postID) {
            rejected.append((mutation.number, FeedError.postNotFound(mutation.postID).description))
        }
        return events
    }
}
