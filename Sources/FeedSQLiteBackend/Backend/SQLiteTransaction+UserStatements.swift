package import FeedCore
internal import FeedSQLite
internal import Foundation

/// Statements of yours on SQLite: `$1`, `$2`, … bound by number, as on PostgreSQL.
extension SQLiteTransaction: FeedUserStatements {
    @discardableResult
    package func execute(_ sql: String, _ arguments: [DatabaseValue]) throws -> Int {
        if arguments.isEmpty {
            // No values to bind: the text may hold several statements (a script), run in order.
            try connection.mapErrors { try connection.execute(sql) }
            return connection.changes
        }
        return try connection.mapErrors {
            let statement = try statement(for: sql)
            try statement.bind(numbered: arguments.map(Self.bindable))
            while try statement.step() {}
            return connection.changes
        }
    }

    /// The most statements the connection's cache may hold for SQL passed to ``execute(_:_:)`` and ``fetch(_:_:)``
    /// to be cached too; FeedSync's own are about fifty.
    static let cachedStatementLimit = 256

    /// A prepared statement for SQL of yours: from the connection's cache (a replica's and a handler's statements are
    /// a few fixed texts, run again and again), unless the cache is full — then prepared for this call only, so SQL
    /// built anew for each call can never grow the cache without end.
    private func statement(for sql: String) throws(SQLiteError) -> Statement {
        guard connection.cachedStatementCount < Self.cachedStatementLimit else { return try connection.makeStatement(sql) }
        let statement = try connection.cachedStatement(sql)
        statement.reset()
        return statement
    }

    package func fetch(_ sql: String, _ arguments: [DatabaseValue]) throws -> [[DatabaseValue]] {
        try connection.mapErrors {
            let statement = try statement(for: sql)
            try statement.bind(numbered: arguments.map(Self.bindable))
            var rows: [[DatabaseValue]] = []
            while try statement.step() {
                let row = statement.row
                rows.append((0..<row.count).map { Self.value(row.value(at: $0)) })
            }
            return rows
        }
    }

    private static func bindable(_ value: DatabaseValue) -> any SQLiteBindable {
        switch value {
        case .null: SQLiteValue.null
        case .integer(let value): value
        case .real(let value): value
        case .text(let value): value
        case .blob(let bytes): Data(bytes)
        }
    }

    private static func value(_ value: SQLiteValue) -> DatabaseValue {
        switch value {
        case .null: .null
        case .integer(let value): .integer(value)
        case .real(let value): .real(value)
        case .text(let value): .text(value)
        case .blob(let data): .blob([UInt8](data))
        }
    }
}
