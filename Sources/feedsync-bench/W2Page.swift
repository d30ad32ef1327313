import FeedSync
import Foundation

/// W2: seeds through `FeedService.seed` (the CLI's `seed` path), then runs the page-query stream through
/// `FeedService.feedPage`, timing each call.
enum W2Page {
    /// The peers' checksum with the default flags.
    static let defaultChecksum = "d6b16f03545fcbf1"

    static func run(_ args: Arguments) throws -> Bool {
        let postCount = try args.int("posts", 100_000)
        let likeCount = try args.int("likes", 1_000_000)
        let users = try args.int("users", 10_000)
        let queryCount = try args.int("queries", 2_000)
        let backend = try BackendChoice(args)
        try args.finish()
        let isDefault = postCount == 100_000 && likeCount == 1_000_000 && users == 10_000 && queryCount == 2_000

        let database = try backend.makeDatabase(file: "page.sqlite")
        defer { database.remove() }
        let bounds = try RunBounds(database)
        let service = try database.open()
        defer { service.close() }

        // The query stream (seed 4), as our API's values, built before timing.
        var random = BenchRandom(seed: 4)
        var queries: [(viewer: String, cursor: FeedCursor)] = []
        queries.reserveCapacity(queryCount)
        for _ in 0..<queryCount {
            let viewer = 1 + random.next(users)
            let createdAt = SeedPlan.t0 + Int64(random.next(postCount))
            let id = 1 + random.next(postCount)
            queries.append(("user\(viewer)", FeedCursor(createdAtMillis: createdAt * 1000, sequence: Int64(id))))
        }

        var start = monotonicNanos()
        let summary = try service.seed(SeedPlan(posts: postCount, users: users, likes: likeCount))
        let seedSeconds = seconds(since: start)

        var latencies: [UInt64] = []
        latencies.reserveCapacity(queryCount)
        var checksum = PageChecksum()
        try bounds.start()
        start = monotonicNanos()
        let cpuStart = processCPUNanos()
        for query in queries {
            let queryStart = monotonicNanos()
            let page = try service.feedPage(viewerID: query.viewer, before: query.cursor, limit: 50)
            latencies.append(monotonicNanos() - queryStart)
            checksum.add(page)
        }
        let elapsed = seconds(since: start)
        let cpuNanos = processCPUNanos() - cpuStart
        try bounds.stop()
        latencies.sort()

        let likes = try service.status().likes
        let likeCountTotal =
            try service.backend.read { tx in try tx.userStatements.fetch("SELECT sum(like_count) FROM posts", []).first?.first?.integer }
            ?? 0
        let ok =
            summary.likes == likeCount && likes == likeCount && likeCountTotal == Int64(likeCount)
            && checksum.idsValid && (queryCount == 0 || checksum.rows > 0)
            && (!isDefault || checksum.hex == defaultChecksum)

        var line = JSONLine()
        line.add("workload", "w2")
        line.add("impl", "feedsync")
        backend.addKeys(to: &line)
        line.add("clients", 1)
        line.add("posts", postCount)
        line.add("likes", likeCount)
        line.add("users", users)
        line.add("queries", queryCount)
        line.add("seed_s", seedSeconds, digits: 3)
        line.add("seconds", elapsed, digits: 3)
        line.add("queries_per_s", Double(queryCount) / max(elapsed, 1e-9), digits: 0)
        line.add("p50_us", Double(percentile(latencies, 50)) / 1000)
        line.add("p99_us", Double(percentile(latencies, 99)) / 1000)
        // This process's CPU time during the queries (user + system, every thread), per query.
        line.add("cpu_us_per_query", Double(cpuNanos) / 1000 / Double(max(queryCount, 1)))
        line.add("rows", checksum.rows)
        line.add("liked_rows", checksum.likedRows)
        line.add("like_count_sum", checksum.likeCountSum)
        line.add("checksum", checksum.hex)
        service.close()
        try bounds.addKeys(to: &line, ops: queryCount)
        line.finish(ok: ok)
        return ok
    }
}

/// FNV-1a 64 over `i << 1 | liked` of every returned row, in order (WORKLOADS.md), with row statistics.
struct PageChecksum {
    private(set) var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    private(set) var rows = 0
    private(set) var likedRows = 0
    private(set) var likeCountSum: Int64 = 0
    /// Whether every row's id was `post<i>` with `i` equal to its insertion sequence.
    private(set) var idsValid = true

    mutating func add(_ page: FeedPage) {
        for row in page.rows {
            let number = Self.postNumber(row.post.id)
            if number != row.post.sequence { idsValid = false }
            let i = number ?? row.post.sequence
            hash = (hash ^ UInt64(bitPattern: i << 1 | (row.liked ? 1 : 0))) &* 0x0000_0100_0000_01b3
            rows += 1
            if row.liked { likedRows += 1 }
            likeCountSum += Int64(row.post.likeCount)
        }
    }

    var hex: String { String(hash, radix: 16) }

    /// `i` of an id `post<i>` (decimal digits, no sign), or `nil`. Reads the UTF-8 bytes in place: `hasPrefix`,
    /// `dropFirst` and `Int64(Substring)` cost ~100 ns a row, a tenth of the whole 50-row page's client time.
    static func postNumber(_ id: String) -> Int64? {
        var id = id
        return id.withUTF8 { bytes -> Int64? in
            let prefix: [UInt8] = [0x70, 0x6F, 0x73, 0x74]  // "post"
            guard bytes.count > 4, bytes.count <= 22, bytes.starts(with: prefix) else { return nil }
            var value: Int64 = 0
            for byte in bytes[4...] {
                guard (0x30...0x39).contains(byte) else { return nil }
                let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (next, overflow2) = shifted.addingReportingOverflow(Int64(byte - 0x30))
                guard !overflow1, !overflow2 else { return nil }
                value = next
            }
            return value
        }
    }
}
