package import FeedCore
internal import FeedSQLite
package import Foundation

/// Whole-database maintenance on SQLite.
extension SQLiteTransaction: FeedMaintenance {
    /// A file has no server.
    package func server() throws -> DatabaseServer? { nil }

    package func counts() throws -> FeedCounts {
        FeedCounts(
            users: try UserRepository(connection).count(), posts: try PostRepository(connection).count(),
            likes: try LikeRepository(connection).count(), events: try EventLog(connection).count())
    }

    package func invariantViolations() throws -> [InvariantViolation] {
        try InvariantChecker(connection).violations()
    }

    package func pruneEvents(through seq: Int64) throws -> Int {
        try EventLog(connection).prune(through: seq)
    }

    package func lastSeq(before date: Date) throws -> Int64? {
        try EventLog(connection).lastSeq(before: date)
    }
}
