internal import FeedCore
internal import Foundation

/// Whole-database maintenance on PostgreSQL.
extension PostgresTransaction: FeedMaintenance {
    func server() throws -> DatabaseServer? {
        let result = try run(
            """
            SELECT coalesce(host(inet_server_addr()) || ':' || inet_server_port(), 'local socket'), NOT pg_is_in_recovery()
            """)
        return DatabaseServer(address: result.string(0, 0) ?? "", isPrimary: result.bool(0, 1) ?? false)
    }

    func counts() throws -> FeedCounts {
        let result = try run(
            """
            SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM posts), (SELECT count(*) FROM likes),
                   (SELECT count(*) FROM events)
            """)
        return FeedCounts(
            users: Int(result.int64(0, 0) ?? 0), posts: Int(result.int64(0, 1) ?? 0), likes: Int(result.int64(0, 2) ?? 0),
            events: Int(result.int64(0, 3) ?? 0))
    }

    func invariantViolations() throws -> [InvariantViolation] {
        try PostgresInvariantChecker(run: { sql, parameters throws(StorageError) in try self.run(sql, parameters, prepared: false) })
            .violations()
    }

    func lastSeq(before date: Date) throws -> Int64? {
        try run("SELECT max(seq) FROM events WHERE at < $1", [.integer(millis(date))]).scalarInt64
    }

    /// Deletes events with `seq <= seq`, keeping the newest event as the SQLite backend does (so both backends count
    /// the same rows after pruning; here the head would keep seqs from being reused anyway), and records the mark.
    func pruneEvents(through seq: Int64) throws -> Int {
        try requireWritable()
        let newest = try lastSeq()
        let limit = min(seq, newest - 1)
        guard limit > 0 else { return 0 }
        let deleted = try run("DELETE FROM events WHERE seq <= $1", [.integer(limit)]).changedRows
        try run("UPDATE log_state SET pruned_through = greatest(pruned_through, $1) WHERE id = 1", [.integer(limit)])
        return deleted
    }
}
