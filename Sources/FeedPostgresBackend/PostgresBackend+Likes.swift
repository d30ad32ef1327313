package import FeedCore
internal import Foundation

/// Like batches: one autocommit statement each, on a lane, so that a batch sent twice applies once.
extension PostgresBackend {
    /// Applies the units with one statement in autocommit — `feedsync_apply_likes_first_send`, which is its own
    /// transaction — so a lone command costs one round trip where `BEGIN`, the statement and `COMMIT` cost three. The statement
    /// commits whole or leaves nothing: a lone unit's failure fails it, and with several units a unit that names an
    /// unknown user or post changes nothing and is a failed result. `join` is never asked (more units cannot join a statement
    /// already sent). Retried as ``write(_:afterCommit:)`` is, on a serialization failure or deadlock.
    ///
    /// A statement that got no answer may have committed. It is sent once more on a new connection all the same (by
    /// the pool, when the connection was found gone): the batch goes on a lane of its own with the next number of that
    /// lane, and the server records each lane's last batch and its result rows in the batch's transaction, so a batch
    /// sent again answers with what it did the first time and changes nothing. A first send records its lane without
    /// reading it (migration 0010); every later send of the batch goes through `feedsync_apply_likes_once`, which reads
    /// the lane first and answers from it (migration 0007).
    package func commitLikes(
        _ units: [LikeUnit], join: (_ count: Int) -> [LikeUnit],
        afterCommit: ([Result<[LikeOutcome], StorageError>]) -> Void
    ) throws -> [Result<[LikeOutcome], StorageError>] {
        guard mode == .migrate else { throw StorageError.readOnly(path: location) }
        guard !writers.containsCurrentThread else { throw Self.reentrantWrite }
        writers.enter()
        defer { writers.leave() }
        var lane = likeLanes.take()
        let batch = lane.nextBatch()
        defer { likeLanes.give(back: lane) }
        // Only the first send of the batch can skip reading the lane: any later one (the pool's after a lost
        // connection, or this loop's after a failure) may follow a send that committed.
        var sends = 0
        return try committing(afterCommit: afterCommit) { () throws -> WriteOutcome<[Result<[LikeOutcome], StorageError>]>? in
            do {
                return try withConnection { connection in
                    let transaction = PostgresTransaction(connection: connection, access: .autocommit, location: location)
                    defer { transaction.invalidate() }
                    sends += 1
                    do {
                        let outcomes = try transaction.applyLikes(units, lane: (lane.id, batch, sentBefore: sends > 1))
                        return .committed(outcomes, lastSeq: transaction.lastAppendedSeq)
                    } catch StorageError.busy(let failure) where failure.code == "40001" || failure.code == "40P01" {
                        return .retry(failure)
                    }
                }
            } catch StorageError.database(let failure) where failure.code == "FSB02" {
                // A send of this batch committed while this one ran; sent again, it answers from the lane.
                return nil
            }
        }
    }
}

/// The lanes of ``PostgresBackend/commitLikes(_:join:afterCommit:)``: each a random id whose batches are numbered
/// upwards, used by one batch at a time, so that the server can tell a batch sent again from a new one.
///
/// `@unchecked Sendable`: `idle` is only touched with `lock` held.
final class LikeLanes: @unchecked Sendable {
    private let lock = NSLock()
    private var idle: [LikeLane] = []

    /// An idle lane, or a new one.
    func take() -> LikeLane {
        lock.withLock { idle.popLast() } ?? LikeLane(id: UUID().uuidString.lowercased(), next: 1)
    }

    /// Returns a lane taken with ``take()``.
    func give(back lane: LikeLane) {
        lock.withLock { idle.append(lane) }
    }
}

/// One lane: its id and the number its next batch gets.
struct LikeLane {
    let id: String
    var next: Int64

    /// The number of the lane's next batch.
    mutating func nextBatch() -> Int64 {
        defer { next += 1 }
        return next
    }
}
