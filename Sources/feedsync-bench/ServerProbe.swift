#if PostgreSQL
    import FeedPostgresBackend
    import FeedSync
    import Foundation
    import Synchronization

    /// What the PostgreSQL server did for a run, seen from the bench's own connection to the run's database
    /// (``PostgresProbe``, `application_name=feedsync-probe`): sampled before and after the timed part.
    final class ServerProbe {
        /// One look at the server (``start()`` or ``end()``).
        struct Sample {
            /// `pg_current_wal_insert_lsn()` in bytes: every byte of WAL inserted so far, by any database.
            var walPosition: Int64 = 0
            /// `pg_stat_wal.wal_records`, `wal_sync` and `wal_bytes`, read once they caught up
            /// (``settledWALStatistics(since:)``).
            var walRecords: Int64 = 0
            var walSyncs: Int64 = 0
            var walStatisticsBytes: Int64 = 0
            /// Whether the WAL statistics caught up within the wait's bound.
            var walSettled = true
            /// The run's database's other backends by pid; `nil` when the server is not on this host.
            var backends: [Int32: Backend]?
            /// ``PostgresRoundTrips/sent``: round trips of every connection of this process.
            var roundTrips = 0
        }

        /// One backend's `application_name` and CPU time so far, in clock ticks.
        struct Backend {
            let application: String
            let ticks: Int64
        }

        private let probe: PostgresProbe
        /// The WAL position and `pg_stat_wal.wal_bytes` when every byte of WAL so far was in the statistics
        /// (``markBaseline()``).
        private var baseline = Sample()

        /// Connects to the run's database at `url`.
        init(url: String) throws {
            probe = try PostgresProbe(url: url)
        }

        /// Notes the WAL position and the WAL bytes in `pg_stat_wal` now, before the run's service opens: this
        /// connection's statistics published first, no other connection of the run yet. From then on the WAL
        /// statistics have caught up when they grew by the WAL's growth.
        func markBaseline() throws {
            try probe.execute("SELECT pg_stat_force_next_flush()")
            let row =
                try probe.execute(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint, wal_bytes::bigint, wal_records "
                        + "FROM pg_stat_wal"
                ).first?.map { $0.integer ?? 0 } ?? [0, 0, 0]
            (baseline.walPosition, baseline.walStatisticsBytes, baseline.walRecords) = (row[0], row[1], row[2])
        }

        /// The median latency of ``CommitAlone/commits`` autocommit UPDATEs of a one-row scratch table in the run's
        /// database, in microseconds (the table is dropped afterwards).
        func commitAlone() throws -> Double {
            try probe.execute("CREATE TABLE feedsync_bench_commit_alone (id integer PRIMARY KEY, n bigint NOT NULL)")
            try probe.execute("INSERT INTO feedsync_bench_commit_alone VALUES (1, 0)")
            var latencies: [UInt64] = []
            latencies.reserveCapacity(CommitAlone.commits)
            for _ in 0..<CommitAlone.commits {
                let start = monotonicNanos()
                try probe.execute("UPDATE feedsync_bench_commit_alone SET n = n + 1 WHERE id = 1", prepared: true)
                latencies.append(monotonicNanos() - start)
            }
            try probe.execute("DROP TABLE feedsync_bench_commit_alone")
            return CommitAlone.median(latencies)
        }

        /// The sample opening the timed part: the WAL statistics first (waiting for them to settle), the counters
        /// that move with the run last.
        func start() throws -> Sample {
            var sample = try settledWALStatistics(since: baseline)
            sample.backends = try backends()
            sample.roundTrips = PostgresRoundTrips.sent.load(ordering: .relaxed)
            return sample
        }

        /// The sample closing the timed part, without the WAL statistics (``finish(_:)``).
        func end() throws -> Sample {
            var sample = Sample()
            sample.roundTrips = PostgresRoundTrips.sent.load(ordering: .relaxed)
            sample.backends = try backends()
            sample.walPosition = try walPosition()
            return sample
        }

        /// Completes the closing sample with the WAL statistics, once they caught up with the WAL written since
        /// `start` (after the run's services closed, at once).
        func finish(_ sample: inout Sample, start: Sample) throws {
            let settled = try settledWALStatistics(since: start)
            (sample.walRecords, sample.walSyncs, sample.walSettled) = (settled.walRecords, settled.walSyncs, settled.walSettled)
        }

        private func walPosition() throws -> Int64 {
            try integer(probe.execute("SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint"))
        }

        /// `pg_stat_wal`'s figures once they caught up with the WAL written since `reference` (a sample whose
        /// statistics had).
        ///
        /// PostgreSQL 15 backends publish their WAL statistics lazily: when idle, at most once a second, and what an
        /// idle connection holds back then waits for a timer of 10 s (a closing connection publishes at once). So this
        /// reads every 200 ms until the WAL bytes in the statistics grew by what the WAL position grew, less its page
        /// headers (24 bytes in 8 KiB) and record alignment (allowed: 2 bytes a record, 8 KiB in all), for at most
        /// 12 s. `walSettled` is false when they had not, or when they grew by more (they then hold WAL written before
        /// `reference`).
        private func settledWALStatistics(since reference: Sample) throws -> Sample {
            let deadline = monotonicNanos() + 12_000_000_000
            while true {
                let row =
                    try probe.execute(
                        "SELECT wal_records, wal_sync, wal_bytes::bigint, pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::bigint "
                            + "FROM pg_stat_wal"
                    ).first?.map { $0.integer ?? 0 } ?? [0, 0, 0, 0]
                var sample = Sample()
                (sample.walRecords, sample.walSyncs, sample.walStatisticsBytes, sample.walPosition) = (row[0], row[1], row[2], row[3])
                let grown = sample.walPosition - reference.walPosition
                let missing = grown - grown * 24 / 8192 - (sample.walStatisticsBytes - reference.walStatisticsBytes)
                let allowed = 2 * (sample.walRecords - reference.walRecords) + 8192
                if missing <= allowed || monotonicNanos() >= deadline {
                    sample.walSettled = (-8192...allowed).contains(missing)
                    return sample
                }
                usleep(200_000)
            }
        }

        /// The CPU time of every other backend of the run's database (`pg_stat_activity`), from `/proc/<pid>/stat`;
        /// `nil` when one of them is not a postgres process of this host (the server runs elsewhere).
        private func backends() throws -> [Int32: Backend]? {
            let rows = try probe.execute(
                "SELECT pid, coalesce(application_name, '') FROM pg_stat_activity "
                    + "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            var backends: [Int32: Backend] = [:]
            for row in rows {
                guard let pid = row.first?.integer, let ticks = Self.postgresTicks(pid: Int32(pid)) else { return nil }
                backends[Int32(pid)] = Backend(application: row.last?.text ?? "", ticks: ticks)
            }
            return backends
        }

        private func integer(_ rows: [[DatabaseValue]]) throws -> Int64 {
            guard let value = rows.first?.first?.integer else { throw BenchError("the server answered no integer") }
            return value
        }

        /// utime + stime of process `pid` in clock ticks (fields 14 and 15 of `/proc/<pid>/stat`), or `nil` when
        /// there is no such process here or its command is not `postgres`.
        static func postgresTicks(pid: Int32) -> Int64? {
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/stat"),
                let text = String(data: data, encoding: .utf8),
                let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")"),
                text[text.index(after: open)..<close] == "postgres"
            else { return nil }
            // After the command: state (field 3), …, utime (14), stime (15).
            let fields = text[text.index(after: close)...].split(separator: " ")
            guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return nil }
            return user + system
        }

        /// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
        static let ticksPerSecond = Double(max(sysconf(Int32(_SC_CLK_TCK)), 1))
    }
#endif
