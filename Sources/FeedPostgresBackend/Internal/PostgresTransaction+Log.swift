internal import FeedCore
internal import Foundation

/// The event log and the durable subscribers' cursors.
extension PostgresTransaction {
    // MARK: - The event log

    /// Appends an event: takes the next seq from `event_log_head` and inserts the event, in one statement.
    ///
    /// The `UPDATE` locks the head row until this transaction ends, which is the ordering cure: another
    /// transaction appending an event waits here until this one commits or rolls back, then reads the head this one
    /// left. So seqs are dense (a rollback gives the seq back with the rest) and commit in seq order: once a reader
    /// has seen seq P, every seq up to P has committed, and no seq at or before P can appear later.
    ///
    /// The cost: event-writing transactions are serialized from their append to their commit — which is why the
    /// append comes last, after the transaction's row work (done in parallel with other transactions'), and the
    /// head is the last lock such a transaction takes (so its holder waits for nothing but its commit).
    func appendEvent(kind: EventKind, userID: String, postID: String?, likeCount: Int?, at time: Date) throws -> EventRecord {
        try requireWritable()
        let stamp = millis(time)
        let result = try run(
            """
            WITH head AS (UPDATE event_log_head SET last_seq = last_seq + 1 WHERE id = 1 RETURNING last_seq)
            INSERT INTO events (seq, kind, user_id, post_id, like_count, at)
            SELECT last_seq, $1::text, $2::text, $3::text, $4::bigint, $5::bigint FROM head
            RETURNING seq
            """,
            [
                .text(kind.rawValue), .text(userID), postID.map(DatabaseValue.text) ?? .null,
                likeCount.map { .integer(Int64($0)) } ?? .null,
                .integer(stamp),
            ])
        guard let seq = result.scalarInt64 else { throw Self.missingHead }
        lastAppendedSeq = seq
        return EventRecord(seq: seq, kind: kind, userID: userID, postID: postID, likeCount: likeCount, at: date(millis: stamp))
    }

    static let missingHead = StorageError.database(
        DatabaseFailure(backend: PostgresBackend.name, code: "P0002", message: "the event_log_head row is missing"))

    func events(after seq: Int64, limit: Int?) throws -> [EventRecord] {
        let limitValue: DatabaseValue = limit.map { $0 < 0 ? .null : .integer(Int64($0)) } ?? .null
        let result = try run(
            "SELECT seq, kind, user_id, post_id, like_count, at FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
            [.integer(seq), limitValue])
        return try (0..<result.rowCount).map { row in try decodeEvent(result, row: row) }
    }

    /// The event in columns 0–5 of `row` (`seq, kind, user_id, post_id, like_count, at`).
    ///
    /// - Throws: ``StorageError/unknownEventKind(kind:seq:schemaVersion:)`` for a kind this binary does not know.
    func decodeEvent(_ result: PostgresResult, row: Int) throws(StorageError) -> EventRecord {
        let seq = result.int64(row, 0) ?? 0
        let stored = result.string(row, 1) ?? ""
        guard let kind = EventKind(rawValue: stored) else { throw try unknownKind(stored, seq: seq) }
        return EventRecord(
            seq: seq, kind: kind, userID: result.string(row, 2) ?? "", postID: result.string(row, 3),
            likeCount: result.int64(row, 4).map(Int.init), at: date(millis: result.int64(row, 5) ?? 0))
    }

    /// The error for an event of a kind this binary does not know, naming the database's schema version.
    private func unknownKind(_ kind: String, seq: Int64) throws(StorageError) -> StorageError {
        let version = try run("SELECT coalesce(max(version), 0) FROM schema_migrations").scalarInt64 ?? 0
        return .unknownEventKind(kind: kind, seq: seq, schemaVersion: Int(version))
    }

    func lastSeq() throws -> Int64 {
        try run("SELECT last_seq FROM event_log_head WHERE id = 1").scalarInt64 ?? 0
    }

    func replayBaseline() throws -> ReplayBaseline {
        let result = try run("SELECT pruned_through, bulk_generation, bulk_through FROM log_state WHERE id = 1")
        guard result.rowCount > 0 else { return ReplayBaseline(prunedThrough: 0, bulkGeneration: 0, bulkThrough: 0) }
        return ReplayBaseline(
            prunedThrough: result.int64(0, 0) ?? 0, bulkGeneration: result.int64(0, 1) ?? 0, bulkThrough: result.int64(0, 2) ?? 0)
    }

    // MARK: - Durable subscribers

    static func validate(name: String, seq: Int64) throws(StorageError) {
        guard !name.isEmpty, name.unicodeScalars.count <= 128 else {
            throw .constraintViolation(field: "subscriber name", reason: "use 1 to 128 characters")
        }
        guard seq >= 0 else { throw .constraintViolation(field: "cursor", reason: "it is negative") }
    }

    func subscriberPosition(for name: String) throws -> SubscriberPosition? {
        if access == .write {
            // Two instances under one name may run passes at once on different connections: under READ COMMITTED
            // both would read the same cursor and apply the same events. A transaction-scoped advisory lock on the
            // name (the two-key space, apart from the migrator's one-key lock) makes their passes take turns until
            // COMMIT, as SQLite's single writer does; it works before the cursor row exists.
            _ = try run(
                "SELECT pg_advisory_xact_lock($1::integer, hashtext($2))",
                [.integer(Int64(Self.subscriberLockSpace)), .text(name)])
        }
        let result = try run("SELECT last_seq, bulk_generation FROM subscriber_cursors WHERE name = $1", [.text(name)])
        guard result.rowCount > 0 else { return nil }
        return SubscriberPosition(lastSeq: result.int64(0, 0) ?? 0, bulkGeneration: result.int64(0, 1) ?? 0)
    }

    /// The first key of the advisory locks that serialize a durable subscriber's passes (`FeSu` in ASCII).
    static let subscriberLockSpace: Int32 = 0x4665_5375

    func advanceSubscriberCursor(_ seq: Int64, for name: String, at time: Date) throws -> Int64 {
        try requireWritable()
        try Self.validate(name: name, seq: seq)
        let result = try run(
            """
            INSERT INTO subscriber_cursors (name, last_seq, updated_at) VALUES ($1, $2, $3)
            ON CONFLICT (name) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
            WHERE excluded.last_seq > subscriber_cursors.last_seq
            RETURNING last_seq
            """, [.text(name), .integer(seq), .integer(millis(time))])
        if let stored = result.scalarInt64 { return stored }
        return try run("SELECT last_seq FROM subscriber_cursors WHERE name = $1", [.text(name)]).scalarInt64 ?? seq
    }

    func markSubscriberRebuilt(_ name: String, through seq: Int64, bulkGeneration: Int64, at time: Date) throws {
        try requireWritable()
        try Self.validate(name: name, seq: seq)
        guard bulkGeneration >= 0 else {
            throw StorageError.constraintViolation(field: "bulk generation", reason: "it is negative")
        }
        try run(
            """
            INSERT INTO subscriber_cursors (name, last_seq, updated_at, bulk_generation) VALUES ($1, $2, $3, $4)
            ON CONFLICT (name) DO UPDATE
            SET last_seq = excluded.last_seq, updated_at = excluded.updated_at, bulk_generation = excluded.bulk_generation
            """, [.text(name), .integer(seq), .integer(millis(time)), .integer(bulkGeneration)])
    }

}
