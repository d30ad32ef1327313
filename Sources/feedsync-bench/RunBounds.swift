import FeedSync
import Foundation

#if PostgreSQL
    import FeedPostgresBackend
#endif

/// What bounds one run's figures on this machine, recorded in its JSON line so that a reader elsewhere can tell why
/// their figures differ (Docs/bench/README.md, "What bounds a figure"): the bench's own CPU time and instructions
/// per operation, the lone commit's latency, and on PostgreSQL the server's CPU time, WAL and round trips per
/// operation.
///
/// Made before the run's service opens (it measures the lone commit then, and on PostgreSQL notes where the WAL
/// statistics stand); ``start()`` and ``stop()`` bracket the timed part; ``addKeys(to:ops:)`` comes after the
/// service closed (its connections then publish their WAL statistics at once).
final class RunBounds {
    private let commitAloneMicros: Double
    private var clientStart: ClientSample?
    private var clientEnd: ClientSample?
    #if PostgreSQL
        private let server: ServerProbe?
        private var serverStart: ServerProbe.Sample?
        private var serverEnd: ServerProbe.Sample?
    #endif

    /// Measures the lone commit on `database`'s machine: SQLite next to the run's file, PostgreSQL on a connection of
    /// the bench's own to the run's database (which stays open for ``start()`` and ``stop()``).
    init(_ database: BenchDatabase) throws {
        #if PostgreSQL
            if database.isPostgreSQL {
                let server = try ServerProbe(url: database.location)
                self.server = server
                commitAloneMicros = try server.commitAlone()
                try server.markBaseline()
                return
            }
            server = nil
        #endif
        commitAloneMicros = try CommitAlone.sqlite(directory: (database.location as NSString).deletingLastPathComponent)
    }

    /// Samples everything just before the timed part (on PostgreSQL this waits, at most 12 s, until the WAL
    /// statistics caught up with what the service's opening and the seed wrote).
    func start() throws {
        #if PostgreSQL
            serverStart = try server?.start()
        #endif
        clientStart = ClientSample.now()
    }

    /// Samples what moves with the run just after the timed part (the WAL statistics wait for ``addKeys(to:ops:)``).
    func stop() throws {
        clientEnd = ClientSample.now()
        #if PostgreSQL
            serverEnd = try server?.end()
        #endif
    }

    /// Adds the keys over `ops` operations (Docs/bench/README.md): `client_cpu_us_per_op`,
    /// `client_instructions_per_op` (where counted), `commit_alone_us`, and on PostgreSQL `round_trips_per_op`,
    /// `wal_bytes_per_op`, `wal_records_per_op`, `wal_syncs_per_op` and, with the server on this host,
    /// `server_cpu_us_per_op` and `server_cpu_us_per_op_notify`. On PostgreSQL it first reads the WAL statistics
    /// (waiting until they caught up, at most 12 s): close the run's services before.
    func addKeys(to line: inout JSONLine, ops: Int) throws {
        if let clientStart, let clientEnd { clientEnd.addKeys(to: &line, since: clientStart, ops: ops) }
        line.add("commit_alone_us", commitAloneMicros, digits: 1)
        #if PostgreSQL
            guard let server, let start = serverStart, var end = serverEnd else { return }
            try server.finish(&end, start: start)
            let ops = Double(max(ops, 1))
            line.add("round_trips_per_op", Double(end.roundTrips - start.roundTrips) / ops, digits: 3)
            if let before = start.backends, let after = end.backends {
                func microseconds(_ application: String?) -> Double {
                    let ticks = after.reduce(Int64(0)) { sum, entry in
                        guard application == nil || entry.value.application == application else { return sum }
                        // A backend that was not there at the start counts from 0.
                        return sum + entry.value.ticks - (before[entry.key]?.ticks ?? 0)
                    }
                    return Double(ticks) / ServerProbe.ticksPerSecond * 1e6 / ops
                }
                line.add("server_cpu_us_per_op", microseconds(nil), digits: 1)
                line.add("server_cpu_us_per_op_notify", microseconds("feedsync-notify"), digits: 1)
            }
            line.add("wal_bytes_per_op", Double(end.walPosition - start.walPosition) / ops, digits: 1)
            // Only from statistics that had caught up at both ends: no figure rather than a wrong one.
            if start.walSettled && end.walSettled {
                line.add("wal_records_per_op", Double(end.walRecords - start.walRecords) / ops, digits: 2)
                line.add("wal_syncs_per_op", Double(end.walSyncs - start.walSyncs) / ops, digits: 3)
            } else {
                line.add("wal_stats_settled", false)
            }
        #endif
    }
}
