/// Statements of yours, run inside a FeedSync transaction: the one place SQL written outside FeedSync runs.
///
/// A transactional durable subscriber's handler writes its own tables in the transaction that moves its cursor
/// (``FeedTransaction/userStatements``), so the effect and the cursor commit together. Placeholders are `$1`, `$2`, …
/// on every backend, and every value is bound, never interpolated. FeedSync's own operations never come through here:
/// each is a named operation of ``FeedTransaction`` or of a feature's protocol.
package protocol FeedUserStatements: AnyObject {
    /// Runs one statement (or, with no arguments, a script of several) and returns the number of rows changed.
    ///
    /// - Throws: ``StorageError``; in a read transaction, ``StorageError/readOnly(path:)``.
    @discardableResult
    func execute(_ sql: String, _ arguments: [DatabaseValue]) throws -> Int
    /// Runs one query and returns its rows.
    func fetch(_ sql: String, _ arguments: [DatabaseValue]) throws -> [[DatabaseValue]]
}

extension FeedUserStatements {
    /// Runs one statement (or a script) with no arguments.
    @discardableResult
    package func execute(_ sql: String) throws -> Int { try execute(sql, []) }
}
