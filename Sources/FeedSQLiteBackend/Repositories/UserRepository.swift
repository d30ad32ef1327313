public import FeedCore
public import FeedSQLite
public import Foundation

/// Reads and writes users on one connection, inside the caller's transaction.
///
/// ```swift
/// try store.write { db in try UserRepository(db).insert(id: "user1", name: "Ada", at: Date()) }
/// ```
public struct UserRepository {
    let db: Connection

    /// A repository over `db`.
    public init(_ db: Connection) { self.db = db }

    /// Inserts a user.
    ///
    /// - Returns: the user's integer key.
    /// - Throws: ``StorageError/userAlreadyExists(_:)``, ``StorageError/constraintViolation(field:reason:)``.
    @discardableResult
    public func insert(id: String, name: String, at time: Date) throws -> Int64 {
        try Validation.checkID(id, field: "user id")
        try Validation.checkName(name)
        return try db.mapErrors(
            {
                try db.run("INSERT INTO users (id, name, created_at) VALUES (?, ?, ?)", id, name, millis(time))
                return db.lastInsertRowID
            },
            { error in
                ResultCode.constraintUnique ~= error.code ? .userAlreadyExists(id) : nil
            })
    }

    /// The user's integer key, or `nil` when no user has this id.
    public func key(for id: String) throws -> Int64? {
        try db.mapErrors { try db.fetchInt64("SELECT user_key FROM users WHERE id = ?", id) }
    }

    /// The user with this id, or `nil`.
    public func find(_ id: String) throws -> User? {
        try db.mapErrors {
            try db.fetchOne("SELECT id, name, created_at FROM users WHERE id = ?", id) { row in
                User(id: row.string(at: 0), name: row.string(at: 1), createdAt: date(millis: row.int64(at: 2)))
            }
        }
    }

    /// Every user, ordered by id.
    public func all() throws -> [User] {
        try db.mapErrors {
            try db.fetchAll("SELECT id, name, created_at FROM users ORDER BY id") { row in
                User(id: row.string(at: 0), name: row.string(at: 1), createdAt: date(millis: row.int64(at: 2)))
            }
        }
    }

    /// The number of users.
    public func count() throws -> Int {
        Int(try db.mapErrors { try db.fetchInt64("SELECT count(*) FROM users") } ?? 0)
    }
}
