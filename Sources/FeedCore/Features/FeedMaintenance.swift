package import Foundation

/// Whole-database maintenance: what `status`, `check` and log retention need, never a command's or a query's path.
///
/// Implemented by both backends' transactions; the domain reaches it through ``FeedTransaction/maintenance``.
package protocol FeedMaintenance: AnyObject {
    /// Row counts.
    func counts() throws -> FeedCounts
    /// The database's integrity and FeedSync's invariants: empty when everything holds.
    func invariantViolations() throws -> [InvariantViolation]
    /// Deletes events with `seq <= seq` (the newest event is always kept, so no seq is reused); returns how many.
    func pruneEvents(through seq: Int64) throws -> Int
    /// The last seq of an event committed before `date`, or `nil`.
    func lastSeq(before date: Date) throws -> Int64?
    /// The server this transaction's connection reached (of a URL that may list several), or `nil` on a backend
    /// without servers (SQLite).
    func server() throws -> DatabaseServer?
}

/// A database server as one connection found it.
package struct DatabaseServer: Sendable, Hashable {
    /// `host:port` of the server's end of the connection, or `local socket`.
    package let address: String
    /// Whether it takes writes: `false` for a standby in recovery.
    package let isPrimary: Bool

    package init(address: String, isPrimary: Bool) {
        self.address = address
        self.isPrimary = isPrimary
    }
}
