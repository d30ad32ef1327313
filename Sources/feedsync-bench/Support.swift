import FeedSync
import Foundation

/// One JSON object on one line, keys in insertion order (the peers' key names where they have the figure).
struct JSONLine {
    private var fields: [String] = []

    mutating func add(_ key: String, _ value: String) {
        fields.append("\"\(key)\":\"\(Self.escaped(value))\"")
    }

    mutating func add(_ key: String, _ value: Int) { fields.append("\"\(key)\":\(value)") }
    mutating func add(_ key: String, _ value: Int64) { fields.append("\"\(key)\":\(value)") }
    mutating func add(_ key: String, _ value: Bool) { fields.append("\"\(key)\":\(value)") }

    mutating func add(_ key: String, _ value: Double, digits: Int = 1) {
        fields.append("\"\(key)\":" + (value.isFinite ? String(format: "%.\(digits)f", value) : "null"))
    }

    /// Adds `peak_rss_mb` and `ok` (always last), then prints the line on stdout.
    mutating func finish(ok: Bool) {
        add("peak_rss_mb", peakRSSMegabytes(), digits: 1)
        add("ok", ok)
        emitLine("{" + fields.joined(separator: ",") + "}")
    }

    private static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}

/// A fresh temporary directory for one run's files, removed by ``remove()``.
struct TempDirectory {
    let path: String

    init() throws {
        let tmp = NSTemporaryDirectory()
        var template = Array((tmp + (tmp.hasSuffix("/") ? "" : "/") + "feedsync-bench.XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw BenchError("mkdtemp failed: errno \(errno)") }
        path = String(cString: made)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func remove() {
        try? FileManager.default.removeItem(atPath: path)
    }
}

/// Peak resident set size of this process so far, in MiB (Linux reports `ru_maxrss` in KiB).
func peakRSSMegabytes() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_maxrss) / 1024
}

/// User plus system CPU time of this process, in nanoseconds.
func processCPUNanos() -> UInt64 {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func nanos(_ time: timeval) -> UInt64 { UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_usec) * 1000 }
    return nanos(usage.ru_utime) + nanos(usage.ru_stime)
}

/// Seconds elapsed since a ``monotonicNanos()`` reading.
func seconds(since start: UInt64) -> Double {
    Double(monotonicNanos() - start) / 1e9
}

/// Nearest-rank percentile of an ascending array (the peers' definition).
func percentile<T: BinaryInteger>(_ sorted: [T], _ p: Double) -> T {
    guard !sorted.isEmpty else { return 0 }
    let rank = Int((p / 100 * Double(sorted.count)).rounded(.up))
    return sorted[min(max(rank, 1), sorted.count) - 1]
}

/// Progress on stderr; stdout carries only the JSON line.
func note(_ text: String) {
    FileHandle.standardError.write(Data("feedsync-bench: \(text)\n".utf8))
}

/// The toggle stream of WORKLOADS.md (seed 3): op `i` is (`1 + next(users)`, `1 + next(posts)`), as our string ids.
struct ToggleStream {
    /// The ops in order, as (user number, post number).
    let pairs: [(user: Int, post: Int)]

    /// `hotPost`: every op goes to post 1 (the stream is drawn as usual, so the users are the same).
    init(count: Int, users: Int, posts: Int, hotPost: Bool = false) {
        var random = BenchRandom(seed: 3)
        var pairs: [(user: Int, post: Int)] = []
        pairs.reserveCapacity(count)
        for _ in 0..<count {
            let user = 1 + random.next(users)
            let post = 1 + random.next(posts)
            pairs.append((user, hotPost ? 1 : post))
        }
        self.pairs = pairs
    }

    /// The ops as toggle commands for ``FeedService/perform(_:)`` (built before any timing starts).
    var commands: [LikeCommand] {
        pairs.map { LikeCommand(.toggle, userID: "user\($0.user)", postID: "post\($0.post)") }
    }

    /// The expected outcome, by an in-memory simulation: distinct likes left, unlikes, and user 1's liked posts.
    func simulate() -> (likes: Int, unlikes: Int, likedByUser1: Set<String>) {
        var liked = Set<Int>()
        var unlikes = 0
        for (user, post) in pairs {
            let key = user &* 100_000_000 &+ post
            if liked.remove(key) != nil { unlikes += 1 } else { liked.insert(key) }
        }
        let user1 = Set(liked.filter { $0 / 100_000_000 == 1 }.map { "post\($0 % 100_000_000)" })
        return (liked.count, unlikes, user1)
    }
}

/// The database-side totals every toggle workload checks.
struct ToggleTotals {
    let likes: Int
    let likeCountTotal: Int64
    let likedByUser1: Set<String>

    init(_ service: FeedService) throws {
        likes = try service.status().likes
        likeCountTotal =
            try service.backend.read { tx in try tx.userStatements.fetch("SELECT sum(like_count) FROM posts", []).first?.first?.integer }
            ?? 0
        likedByUser1 = try service.likedPostIDs(userID: "user1")
    }
}
