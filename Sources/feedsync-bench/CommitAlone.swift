import FeedSQLite
import Foundation

/// The floor every commit pays on this machine: the median latency of lone tiny write transactions, each timed on
/// its own with nothing else running (`commit_alone_us`).
enum CommitAlone {
    /// Commits timed per measurement.
    static let commits = 200

    /// SQLite: `commits` single-row INSERT transactions on a scratch database `<directory>/commit-alone.sqlite`,
    /// opened with FeedSQLite's defaults, which are FeedSync's (WAL, `synchronous=NORMAL`, the background
    /// checkpoint); the file is removed afterwards. Returns the median in microseconds.
    static func sqlite(directory: String) throws -> Double {
        let path = directory + "/commit-alone.sqlite"
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        let database = try Database(path: path)
        defer { database.close() }
        try database.write { db in try db.execute("CREATE TABLE commit_alone (id INTEGER PRIMARY KEY, n INTEGER NOT NULL)") }
        var latencies: [UInt64] = []
        latencies.reserveCapacity(commits)
        for n in 0..<commits {
            let start = monotonicNanos()
            try database.write { db in _ = try db.run("INSERT INTO commit_alone (n) VALUES (?)", Int64(n)) }
            latencies.append(monotonicNanos() - start)
        }
        return median(latencies)
    }

    /// The median of `latencies` (nanoseconds) in microseconds.
    static func median(_ latencies: [UInt64]) -> Double {
        Double(percentile(latencies.sorted(), 50)) / 1000
    }
}
