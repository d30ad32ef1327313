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

    /// Stores the subscriber's last applied seq.
    ///
    /// - Throws: ``StorageError/constraintViolation(field:reason:)`` for an empty or over-long name or a negative
    ///   seq.
    public func setCursor(_ seq: Int64, for name: String, at time: Date) throws {
        guard !name.isEmpty, name.unicodeScalars.count <= 128 else {
            throw StorageError.constraintViolation(field: "subscriber name", reason: "use 1 to 128 characters")
        }
        guard seq >= 0 else { throw StorageError.constraintViolation(field: "cursor", reason: "it is negative") }
        try db.mapErrors {
            try db.run(
                """
                INSERT INTO subscriber_cursors (name, last_seq, updated_at) VALUES (?1, ?2, ?3)
                ON CONFLICT (name) DO UPDATE SET last_seq = excluded.last_seq, updated_at = excluded.updated_at
                """, name, seq, millis(time))
        }
    }

    /// Removes a subscriber's cursor.
    public func removeCursor(for name: String) throws {
        try db.mapErrors { try db.run("DELETE FROM subscriber_cursors WHERE name = ?", name) }
    }

    /// Every stored cursor by subscriber name.
    public func all() throws -> [String: Int64] {
        try db.mapErrors {
            var cursors: [String: Int64] = [:]
            try db.cachedStatement("SELECT name, last_seq FROM subscriber_cursors").forEachRow { row in
                cursors[row.string(at: 0)] = row.int64(at: 1)
            }
            return cursors
        }
    }
}
