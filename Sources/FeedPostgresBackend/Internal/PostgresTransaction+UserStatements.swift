internal import FeedCore
internal import Foundation

/// Statements of yours on PostgreSQL: bound with the extended protocol, or a script through the simple one.
extension PostgresTransaction: FeedUserStatements {
    func execute(_ sql: String, _ arguments: [DatabaseValue]) throws -> Int {
        // Statements that change rows belong in write transactions, as on SQLite: a read (or a connection outside
        // any transaction) refuses them before sending anything.
        try requireWritable()
        guard arguments.isEmpty else { return try run(sql, arguments, prepared: false).changedRows }
        // No values to bind: the simple query protocol, which runs a script of several statements, as SQLite does.
        return try runScript(sql).changedRows
    }

    func fetch(_ sql: String, _ arguments: [DatabaseValue]) throws -> [[DatabaseValue]] {
        try run(sql, arguments, prepared: false).rows()
    }
}
