internal import FeedCore
internal import Foundation

/// Likes: the batch function every like command runs through, and the single rows it is made of.
extension PostgresTransaction {
    // MARK: - Likes

    func insertLike(userKey: Int64, postKey: Int64, at time: Date) throws -> Bool {
        try requireWritable()
        return try run(
            "INSERT INTO likes (user_key, post_key, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
            [.integer(userKey), .integer(postKey), .integer(millis(time))]
        ).changedRows > 0
    }

    func deleteLike(userKey: Int64, postKey: Int64) throws -> Bool {
        try requireWritable()
        return try run("DELETE FROM likes WHERE user_key = $1 AND post_key = $2", [.integer(userKey), .integer(postKey)]).changedRows > 0
    }

    func likeExists(userKey: Int64, postKey: Int64) throws -> Bool {
        try run(
            "SELECT EXISTS (SELECT 1 FROM likes WHERE user_key = $1 AND post_key = $2)", [.integer(userKey), .integer(postKey)]
        ).bool(0, 0) ?? false
    }

    func likedPostIDs(userKey: Int64) throws -> Set<String> {
        let result = try run(
            "SELECT p.id FROM likes l JOIN posts p ON p.post_key = l.post_key WHERE l.user_key = $1", [.integer(userKey)])
        return Set((0..<result.rowCount).compactMap { result.string($0, 0) })
    }

    func likeCount(postKey: Int64) throws -> Int? {
        try run("SELECT like_count FROM posts WHERE post_key = $1", [.integer(postKey)]).scalarInt64.map(Int.init)
    }

    /// The whole batch in one statement: `feedsync_like_results` (migration 0008) locks the batch's posts, then its
    /// users, in key order, applies each unit, appends the events last, and returns one result per operation. With one
    /// unit, its failure fails the statement — and so the transaction — and is thrown; with several, a unit that names
    /// an unknown user or post changes nothing and comes back as a failed result.
    func applyLikes(_ units: [LikeUnit]) throws -> [Result<[LikeOutcome], StorageError>] {
        try applyLikes(units, lane: nil)
    }

    /// ``applyLikes(_:)``; with a lane, as batch `lane.batch` of lane `lane.id`. A batch sent before (which may have
    /// committed) goes through `feedsync_apply_likes_once` (migration 0007), which answers from the lane when the batch
    /// is there and changes nothing; a first send goes through `feedsync_apply_likes_first_send` (migration 0010),
    /// which records the lane without reading it first, and fails with FSB02 when the lane is already at the batch.
    func applyLikes(
        _ units: [LikeUnit], lane: (id: String, batch: Int64, sentBefore: Bool)?
    ) throws -> [Result<[LikeOutcome], StorageError>] {
        try requireWritable()
        var unitNumbers: [Int64] = []
        var actions: [String] = []
        var userIDs: [String] = []
        var postIDs: [String] = []
        var stamps: [Int64] = []
        for (number, unit) in units.enumerated() {
            let stamp = millis(unit.at)
            for operation in unit.operations {
                unitNumbers.append(Int64(number))
                actions.append(operation.action.rawValue)
                userIDs.append(operation.userID)
                postIDs.append(operation.postID)
                stamps.append(stamp)
            }
        }
        guard !actions.isEmpty else { return units.map { _ in .success([]) } }
        var arguments: [DatabaseValue] = [
            .text(PostgresArray.integers(unitNumbers)), .text(PostgresArray.text(actions)),
            .text(PostgresArray.text(userIDs)), .text(PostgresArray.text(postIDs)), .text(PostgresArray.integers(stamps)),
        ]
        let sql: String
        if let lane {
            arguments += [.text(lane.id), .integer(lane.batch)]
            sql =
                lane.sentBefore
                ? """
                SELECT failed_code, failed_message, liked, like_count, seq
                FROM feedsync_apply_likes_once($6::uuid, $7::bigint, $1::integer[], $2::text[], $3::text[], $4::text[], $5::bigint[])
                """
                : """
                SELECT failed_code, failed_message, liked, like_count, seq FROM unnest(feedsync_apply_likes_first_send(
                    $6::uuid, $7::bigint, $1::integer[], $2::text[], $3::text[], $4::text[], $5::bigint[]))
                """
        } else {
            sql = """
                SELECT failed_code, failed_message, liked, like_count, seq
                FROM unnest(feedsync_like_results($1::integer[], $2::text[], $3::text[], $4::text[], $5::bigint[]))
                """
        }
        let result = try run(
            sql, arguments,
            claim: { failure in
                if failure.sqlState == "FSU01" || failure.sqlState == "FSP01" {
                    return Self.unitFailure(code: failure.sqlState, message: failure.message, in: units)
                }
                // A lone command reads its user's key without a lock (its post's row is the one it locks): when an
                // erasure of that user commits meanwhile, the like row's foreign key finds no user. The post cannot
                // be the missing row, as this transaction holds it; so the user was erased.
                if failure.sqlState == "23503", let user = userIDs.first, userIDs.allSatisfy({ $0 == user }) {
                    return .userNotFound(user)
                }
                return nil
            })
        guard result.rowCount == actions.count else {
            throw StorageError.database(
                DatabaseFailure(
                    backend: PostgresBackend.name, code: "XX000",
                    message: "feedsync_like_results returned \(result.rowCount) rows for \(actions.count) operations"))
        }
        var outcomes: [Result<[LikeOutcome], StorageError>] = []
        outcomes.reserveCapacity(units.count)
        var row = 0
        for unit in units {
            if let code = result.string(row, 0) {
                outcomes.append(.failure(Self.unitFailure(code: code, message: result.string(row, 1) ?? "", in: [unit])))
                row += unit.operations.count
                continue
            }
            var list: [LikeOutcome] = []
            list.reserveCapacity(unit.operations.count)
            for operation in unit.operations {
                let liked = result.bool(row, 2) ?? false
                let count = Int(result.int64(row, 3) ?? 0)
                let event = result.int64(row, 4).map { seq in
                    EventRecord(
                        seq: seq, kind: liked ? .liked : .unliked, userID: operation.userID, postID: operation.postID,
                        likeCount: count, at: date(millis: millis(unit.at)))
                }
                if let event { lastAppendedSeq = max(lastAppendedSeq ?? 0, event.seq) }
                list.append(LikeOutcome(liked: liked, likeCount: count, event: event))
                row += 1
            }
            outcomes.append(.success(list))
        }
        return outcomes
    }

    /// The error for a unit that `feedsync_like_results` reported failed: `FSU01`/`FSP01` carry the unknown user's or
    /// post's id; anything else is a database failure.
    private static func unitFailure(code: String?, message: String, in units: [LikeUnit]) -> StorageError {
        switch code {
        case "FSU01":
            let id = units.lazy.flatMap(\.operations).first { $0.userID == message }?.userID
            return .userNotFound(id ?? message)
        case "FSP01":
            let id = units.lazy.flatMap(\.operations).first { $0.postID == message }?.postID
            return .postNotFound(id ?? message)
        default:
            return .database(DatabaseFailure(backend: PostgresBackend.name, code: code ?? "XX000", message: message))
        }
    }

    func appendLikeChange(_ kind: EventKind, userID: String, postID: String, postKey: Int64, at time: Date) throws -> EventRecord {
        precondition(kind == .liked || kind == .unliked, "API Violation: appendLikeChange with \(kind)")
        try requireWritable()
        guard let count = try likeCount(postKey: postKey) else { throw StorageError.postNotFound(postID) }
        return try appendEvent(kind: kind, userID: userID, postID: postID, likeCount: count, at: time)
    }

}
