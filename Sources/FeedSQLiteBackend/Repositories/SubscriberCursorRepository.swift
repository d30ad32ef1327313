public import FeedCore
public import FeedSQLite
public import Foundation

/// Durable subscriber cursors: for each named subscriber, the last event seq it applied.
public struct SubscriberCursorRepository {
    let db: Connection

    /// A repository over `db`.
    public init(_ db: Connection) { self.db = db }

    /// The subscriber's last applied seq, or `nil` when it has never stored one.
    public func cursor(for name: String) throws -> Int64? {
        try db.mapErrors { try db.fetchInt64("SELECT last_seq FROM subscriber_cursors WHERE name = ?", name) }
    }

    /// The subscriber's cursor and bulk generation, or `nil` when it has never stored a cursor.
    ///
    /// Read it inside the write transaction that applies the next batch and advances the cursor: then a second
    /// instance running under the same name waits for that transaction and sees its result, so no batch is
    /// applied twice.
    public func position(for name: String) throws -> SubscriberPosition? {
        try db.mapErrors {
            try db.fetchOne("SELECT last_seq, bulk_generation FROM subscriber_cursors WHERE name = ?", name) { row in
                SubscriberPosition(lastSeq: row.int64(at: 0), bulkGeneration: row.int64(at: 1))
            }
        }
    }

    /// Stores the subscriber's last applied seq.
    ///
    /// - Throws: ``StorageError/constraintViolation(field:reason:)`` for an empty or over-long name or a negative
    ///   seq.
    public func setCursor(_ seq: Int64, for name: String, at time: Date) throws {
        try Self.validate(name: name, seq: seq)
        try db.mapErrors {
            try db.run(
                """
                INSERT INTO subscriber_cursors (name, last_seq, updated_at) VALUES (?1, ?2, ?3)
                ON CONFLICT (name) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
                """, name, seq, millis(time))
        }
    }

    /// Moves the subscriber's cursor forward to `seq`; a cursor already at or past `seq` stays where it is.
    ///
    /// For a handler that runs outside the database: another instance under the same name may have advanced the
    /// cursor further meanwhile, and a cursor never moves back.
    ///
    /// - Returns: the stored cursor afterwards.
    /// - Throws: ``StorageError/constraintViolation(field:reason:)`` as ``setCursor(_:for:at:)``.
    @discardableResult
    public func advanceCursor(_ seq: Int64, for name: String, at time: Date) throws -> Int64 {
        try Self.validate(name: name, seq: seq)
        return try db.mapErrors {
            try db.run(
                """
                INSERT INTO subscriber_cursors (name, last_seq, updated_at) VALUES (?1, ?2, ?3)
                ON CONFLICT (name) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
                WHERE excluded.last_seq > subscriber_cursors.last_seq
                """, name, seq, millis(time))
            return try db.fetchInt64("SELECT last_seq FROM subscriber_cursors WHERE name = ?", name) ?? seq
        }
    }

    /// Records a rebuild: the subscriber's state now reflects the tables as of `seq` and includes bulk load
    /// `bulkGeneration`.
    ///
    /// - Throws: ``StorageError/constraintViolation(field:reason:)`` as ``setCursor(_:for:at:)``, or for a negative
    ///   generation.
    public func markRebuilt(_ name: String, through seq: Int64, bulkGeneration: Int64, at time: Date) throws {
        try Self.validate(name: name, seq: seq)
        guard bulkGeneration >= 0 else {
            throw StorageError.constraintViolation(field: "bulk generation", reason: "it is negative")
        }
        try db.mapErrors {
            try db.run(
                """
                INSERT INTO subscriber_cursors (name, last_seq, updated_at, bulk_generation) VALUES (?1, ?2, ?3, ?4)
                ON CONFLICT (name) DO UPDATE
                SET last_seq = excluded.last_seq, updated_at = excluded.updated_at, bulk_generation = excluded.bulk_generation
                """, name, seq, millis(time), bulkGeneration)
        }
    }

    private static func validate(name: String, seq: Int64) throws {
        guard !name.isEmpty, name.unicodeScalars.count <= 128 else {
            throw StorageError.constraintViolation(field: "subscriber name", reason: "use 1 to 128 characters")
        }
        guard seq >= 0 else { throw StorageError.constraintViolation(field: "cursor", reason: "it is negative") }
    }
}
