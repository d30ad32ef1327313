public import FeedSQLite
public import Foundation

/// The append-only event log on one connection, inside the caller's transaction.
///
/// Appending in the same transaction as the change it records is what makes the log exact: a rolled-back change
/// leaves no event, a committed one always has exactly one.
public struct EventLog {
    let db: Connection

    /// A log over `db`.
    public init(_ db: Connection) { self.db = db }

    /// Appends an event and returns it with its new `seq`.
    public func append(kind: EventKind, userID: String, postID: String?, likeCount: Int?, at time: Date) throws -> EventRecord {
        let stamp = millis(time)
        let seq = try db.mapErrors {
            try db.fetchOne(
                "INSERT INTO events (kind, user_id, post_id, like_count, at) VALUES (?, ?, ?, ?, ?) RETURNING seq",
                kind.rawValue, userID, postID, likeCount, stamp
            ) { $0.int64(at: 0) }
        }
        guard let seq else { throw StorageError.sqlite(SQLiteError(code: .error, message: "INSERT … RETURNING gave no seq")) }
        return EventRecord(seq: seq, kind: kind, userID: userID, postID: postID, likeCount: likeCount, at: date(millis: stamp))
    }

    /// Appends a like or unlike event whose like count is read from the post in the same statement.
    ///
    /// - Precondition: `kind` is ``EventKind/liked`` or ``EventKind/unliked``.
    public func appendLikeChange(_ kind: EventKind, userID: String, postID: String, postKey: Int64, at time: Date) throws -> EventRecord {
        precondition(kind == .liked || kind == .unliked, "API Violation: appendLikeChange with \(kind)")
        let stamp = millis(time)
        let row = try db.mapErrors {
            try db.fetchOne(
                """
                INSERT INTO events (kind, user_id, post_id, like_count, at)
                VALUES (?, ?, ?, (SELECT like_count FROM posts WHERE post_key = ?), ?) RETURNING seq, like_count
                """,
                kind.rawValue, userID, postID, postKey, stamp
            ) { ($0.int64(at: 0), $0.int(at: 1)) }
        }
        guard let row else { throw StorageError.sqlite(SQLiteError(code: .error, message: "INSERT … RETURNING gave no seq")) }
        return EventRecord(seq: row.0, kind: kind, userID: userID, postID: postID, likeCount: row.1, at: date(millis: stamp))
    }

    /// Calls `body` for every event with `seq > after`, in order, up to `limit` events (all when `nil`).
    ///
    /// Streams rows without materialising the whole range.
    public func forEach(after seq: Int64, limit: Int? = nil, _ body: (EventRecord) throws -> Void) throws {
        try db.mapErrors {
            try db.cachedStatement(
                "SELECT seq, kind, user_id, post_id, like_count, at FROM events WHERE seq > ? ORDER BY seq LIMIT ?"
            ).forEachRow(seq, limit ?? -1) { row in try body(Self.decode(row)) }
        }
    }

    /// The events with `seq > after`, in order, up to `limit` (all when `nil`).
    public func events(after seq: Int64, limit: Int? = nil) throws -> [EventRecord] {
        var events: [EventRecord] = []
        try forEach(after: seq, limit: limit) { events.append($0) }
        return events
    }

    /// The highest seq ever assigned (0 for an empty log), even if that event was pruned since.
    public func lastSeq() throws -> Int64 {
        try db.mapErrors {
            let sequence = try db.fetchInt64("SELECT seq FROM sqlite_sequence WHERE name = 'events'") ?? 0
            let maximum = try db.fetchInt64("SELECT max(seq) FROM events") ?? 0
            return max(sequence, maximum)
        }
    }

    /// The lowest seq still in the log, or `nil` when the log is empty.
    public func firstSeq() throws -> Int64? {
        try db.mapErrors { try db.fetchInt64("SELECT min(seq) FROM events") }
    }

    /// The number of events in the log.
    public func count() throws -> Int {
        Int(try db.mapErrors { try db.fetchInt64("SELECT count(*) FROM events") } ?? 0)
    }

    /// The highest seq removed by pruning (0 while the log is complete from seq 1).
    public func prunedThrough() throws -> Int64 {
        try db.mapErrors { try db.fetchInt64("SELECT pruned_through FROM log_state WHERE id = 1") ?? 0 }
    }

    /// Deletes every event with `seq <= through` and records the pruning point.
    ///
    /// - Returns: the number of events deleted.
    @discardableResult
    public func prune(through seq: Int64) throws -> Int {
        try db.mapErrors {
            let deleted = try db.run("DELETE FROM events WHERE seq <= ?", seq)
            try db.run("UPDATE log_state SET pruned_through = max(pruned_through, ?) WHERE id = 1", seq)
            return deleted
        }
    }

    /// The seq of the newest event committed before `date`, or `nil` when there is none.
    public func lastSeq(before date: Date) throws -> Int64? {
        try db.mapErrors { try db.fetchInt64("SELECT max(seq) FROM events WHERE at < ?", millis(date)) }
    }

    static func decode(_ row: Row) -> EventRecord {
        EventRecord(
            seq: row.int64(at: 0),
            kind: EventKind(rawValue: row.string(at: 1)) ?? .liked,
            userID: row.string(at: 2),
            postID: row.optionalString(at: 3),
            likeCount: row.optionalInt64(at: 4).map(Int.init),
            at: date(millis: row.int64(at: 5)))
    }
}
