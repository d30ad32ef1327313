public import FeedCore
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
    ///
    /// `seq` is the new row's rowid (`sqlite3_last_insert_rowid`); a plain `INSERT` on a cached statement, without
    /// `RETURNING`, which SQLite would run through an ephemeral table.
    public func append(kind: EventKind, userID: String, postID: String?, likeCount: Int?, at time: Date) throws -> EventRecord {
        let stamp = millis(time)
        let seq = try db.mapErrors {
            try db.run(
                "INSERT INTO events (kind, user_id, post_id, like_count, at) VALUES (?, ?, ?, ?, ?)",
                kind.rawValue, userID, postID, likeCount, stamp)
            return db.lastInsertRowID
        }
        return EventRecord(seq: seq, kind: kind, userID: userID, postID: postID, likeCount: likeCount, at: date(millis: stamp))
    }

    /// Appends a like or unlike event carrying the post's like count as it is now, inside the transaction that
    /// changed it.
    ///
    /// - Precondition: `kind` is ``EventKind/liked`` or ``EventKind/unliked``.
    public func appendLikeChange(_ kind: EventKind, userID: String, postID: String, postKey: Int64, at time: Date) throws -> EventRecord {
        precondition(kind == .liked || kind == .unliked, "API Violation: appendLikeChange with \(kind)")
        let count = try db.mapErrors { try db.fetchInt64("SELECT like_count FROM posts WHERE post_key = ?", postKey) }
        guard let count else { throw StorageError.postNotFound(postID) }
        return try append(kind: kind, userID: userID, postID: postID, likeCount: Int(count), at: time)
    }

    /// Calls `body` for every event with `seq > after`, in order, up to `limit` events (all when `nil`).
    ///
    /// Streams rows without materialising the whole range.
    public func forEach(after seq: Int64, limit: Int? = nil, _ body: (EventRecord) throws -> Void) throws {
        try db.mapErrors {
            try db.cachedStatement(
                "SELECT seq, kind, user_id, post_id, like_count, at FROM events WHERE seq > ? ORDER BY seq LIMIT ?"
            ).forEachRow(seq, limit ?? -1) { row in try body(decode(row)) }
        }
    }

    /// The events with `seq > after`, in order, up to `limit` (all when `nil`).
    public func events(after seq: Int64, limit: Int? = nil) throws -> [EventRecord] {
        var events: [EventRecord] = []
        try forEach(after: seq, limit: limit) { events.append($0) }
        return events
    }

    /// The highest seq ever assigned (0 for an empty log). Pruning keeps the newest event, so this never goes back.
    public func lastSeq() throws -> Int64 {
        try db.mapErrors { try db.fetchInt64("SELECT max(seq) FROM events") ?? 0 }
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

    /// What the log can no longer replay: the pruning mark and the latest bulk load.
    public func replayBaseline() throws -> ReplayBaseline {
        try db.mapErrors {
            try db.fetchOne("SELECT pruned_through, bulk_generation, bulk_through FROM log_state WHERE id = 1") { row in
                ReplayBaseline(prunedThrough: row.int64(at: 0), bulkGeneration: row.int64(at: 1), bulkThrough: row.int64(at: 2))
            } ?? ReplayBaseline(prunedThrough: 0, bulkGeneration: 0, bulkThrough: 0)
        }
    }

    /// Records, inside the transaction that did it, that likes were written outside the log (a bulk load): the
    /// bulk generation goes up and the log's last seq becomes the bulk baseline, so every durable subscriber
    /// rebuilds from the tables before it applies another event.
    public func recordBulkLoad() throws {
        try db.mapErrors {
            try db.run(
                """
                UPDATE log_state
                SET bulk_loaded = 1, bulk_generation = bulk_generation + 1,
                    bulk_through = (SELECT coalesce(max(seq), 0) FROM events)
                WHERE id = 1
                """)
        }
    }

    /// Deletes every event with `seq <= through` — except the newest event of the log, which is always kept so that
    /// no seq is ever reused — and records the pruning point.
    ///
    /// - Returns: the number of events deleted.
    @discardableResult
    public func prune(through seq: Int64) throws -> Int {
        try db.mapErrors {
            let newest = try db.fetchInt64("SELECT max(seq) FROM events") ?? 0
            let limit = min(seq, newest - 1)
            guard limit > 0 else { return 0 }
            let deleted = try db.run("DELETE FROM events WHERE seq <= ?", limit)
            try db.run("UPDATE log_state SET pruned_through = max(pruned_through, ?) WHERE id = 1", limit)
            return deleted
        }
    }

    /// The seq of the newest event committed before `date`, or `nil` when there is none.
    public func lastSeq(before date: Date) throws -> Int64? {
        try db.mapErrors { try db.fetchInt64("SELECT max(seq) FROM events WHERE at < ?", millis(date)) }
    }

    /// The event in `row`.
    ///
    /// - Throws: ``StorageError/unknownEventKind(kind:seq:schemaVersion:)`` for a kind this binary does not know,
    ///   naming the database's schema version (`PRAGMA user_version`).
    func decode(_ row: Row) throws -> EventRecord {
        let seq = row.int64(at: 0)
        let stored = row.string(at: 1)
        guard let kind = EventKind(rawValue: stored) else {
            let version = (try? db.fetchInt64("PRAGMA user_version")).flatMap { $0 } ?? 0
            throw StorageError.unknownEventKind(kind: stored, seq: seq, schemaVersion: Int(version))
        }
        return EventRecord(
            seq: seq,
            kind: kind,
            userID: row.string(at: 2),
            postID: row.optionalString(at: 3),
            likeCount: row.optionalInt64(at: 4).map(Int.init),
            at: date(millis: row.int64(at: 5)))
    }
}
