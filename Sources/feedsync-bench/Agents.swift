import FeedSync
import Foundation

/// Helper processes for W5 and the cross-process tests; not workloads themselves.
///
/// - `agent-writer --db PATH [--rate 200] [--count 1000] [--users 1000] [--posts 10000] [--checkpoint inline|background]`:
///   toggles likes from the toggle stream at a fixed rate (0: back to back); after each commit prints `seq wallNanos` (CLOCK_REALTIME) and flushes.
/// - `agent-load --db PATH --ops N --seed S [--users 20] [--posts 50] [--busy-timeout SECONDS]`: N random like /
///   unlike / toggle commands, each its own transaction; prints `done N failures F`; exit status 1 if any command
///   failed (each failure on stderr with how long the command took). `--busy-timeout` replaces the library's 5 s.
/// - `agent-crash --db PATH --user ID [--threads T]`: likes/unlikes in a loop forever, printing
///   `ack SEQ POST LIKED` after each commit, until killed; with T > 1, T threads do so at once as users
///   `user1`…`userT` (so their commands overlap and share transactions through group commit).
/// - `agent-subscriber --db PATH --name NAME`: a durable subscriber whose effect lives in the same database
///   (table `agent_applied`), exactly once; follows other processes' changes; prints `applied SEQ` when caught up
///   and `failed ERROR` when a pass failed (it retries).
enum Agents {
    static func writer(_ args: Arguments) throws {
        let path = args.string("db", "")
        let rate = try args.int("rate", 200)
        let count = try args.int("count", 1000)
        let users = try args.int("users", 1000)
        let posts = try args.int("posts", 10_000)
        let checkpoint = args.string("checkpoint", FeedOpenOptions().backgroundCheckpoints ? "background" : "inline")
        try args.finish()
        guard !path.isEmpty else { throw BenchError("agent-writer needs --db PATH") }
        guard checkpoint == "inline" || checkpoint == "background" else {
            throw BenchError("agent-writer --checkpoint takes inline or background, not \(checkpoint)")
        }
        var options = FeedOpenOptions()
        options.backgroundCheckpoints = checkpoint == "background"
        let service = try FeedService(location: path, options: options)
        var random = BenchRandom(seed: 3)
        let interval = rate > 0 ? 1_000_000_000 / UInt64(rate) : 0
        let start = monotonicNanos()
        for i in 0..<count {
            if interval > 0 {
                let due = start + UInt64(i) * interval
                let now = monotonicNanos()
                if due > now { usleep(UInt32((due - now) / 1000)) }
            }
            let user = 1 + random.next(users)
            let post = 1 + random.next(posts)
            let result = try service.toggle(userID: "user\(user)", postID: "post\(post)")
            emitLine("\(result.seq ?? 0) \(realtimeNanos())")
        }
    }

    static func load(_ args: Arguments) throws {
        let path = args.string("db", "")
        let ops = try args.int("ops", 5000)
        let seed = try args.int("seed", 1)
        let users = try args.int("users", 20)
        let posts = try args.int("posts", 50)
        let options = try busyTimeoutOptions(args)
        try args.finish()
        guard !path.isEmpty else { throw BenchError("agent-load needs --db PATH") }
        let service = try FeedService(location: path, options: options)
        var random = BenchRandom(seed: UInt64(seed))
        var failures = 0
        for _ in 0..<ops {
            let user = "user\(1 + random.next(users))"
            let post = "post\(1 + random.next(posts))"
            let started = monotonicNanos()
            do {
                switch random.next(3) {
                case 0: try service.like(userID: user, postID: post)
                case 1: try service.unlike(userID: user, postID: post)
                default: try service.toggle(userID: user, postID: post)
                }
            } catch {
                failures += 1
                FileHandle.standardError.write(Data("agent-load: after \(elapsedMillis(since: started)) ms: \(error)\n".utf8))
            }
        }
        emitLine("done \(ops) failures \(failures)")
        if failures > 0 { exit(1) }
    }

    static func crash(_ args: Arguments) throws {
        let path = args.string("db", "")
        let user = args.string("user", "user1")
        let posts = try args.int("posts", 50)
        let threads = try args.int("threads", 1)
        try args.finish()
        guard !path.isEmpty else { throw BenchError("agent-crash needs --db PATH") }
        guard threads >= 1 else { throw BenchError("agent-crash needs --threads 1 or more") }
        let service = try FeedService(location: path)
        @Sendable func loop(user: String, seed: UInt64) {
            var random = BenchRandom(seed: seed)
            while true {
                do {
                    let result = try service.toggle(userID: user, postID: "post\(1 + random.next(posts))")
                    emitLine("ack \(result.seq ?? 0) \(result.postID) \(result.liked ? 1 : 0)")
                } catch {
                    FileHandle.standardError.write(Data("agent-crash: \(error)\n".utf8))
                    exit(1)
                }
            }
        }
        if threads == 1 {
            loop(user: user, seed: UInt64(getpid()))
        }
        for k in 1...threads {
            Thread.detachNewThread { loop(user: "user\(k)", seed: UInt64(getpid()) &* 31 &+ UInt64(k)) }
        }
        while true { pause() }
    }

    static func subscriber(_ args: Arguments) throws {
        let path = args.string("db", "")
        let name = args.string("name", "agent")
        try args.finish()
        guard !path.isEmpty else { throw BenchError("agent-subscriber needs --db PATH") }
        let service = try FeedService(location: path)
        _ = try service.backend.write(
            { tx in
                try tx.userStatements.execute("CREATE TABLE IF NOT EXISTS agent_applied (subscriber TEXT NOT NULL, seq INTEGER NOT NULL)")
            },
            afterCommit: { _ in })
        let subscriber = DurableSubscriber(
            name: name, service: service, batchSize: 10,
            delivery: .transactional { event, tx in
                try tx.execute("INSERT INTO agent_applied (subscriber, seq) VALUES ($1, $2)", [.text(name), .integer(event.seq)])
            })
        let printer = subscriber.signals.sink { signal in
            switch signal {
            case .caughtUp(let seq): emitLine("applied \(seq)")
            case .failed(let error): emitLine("failed \(error)")
            default: break
            }
        }
        let feed = ChangeFeed(service: service)
        try subscriber.start()
        try feed.start()
        // Runs until killed; a line on stdin saying "stop" ends it cleanly.
        while let line = readLine() {
            if line == "stop" { break }
        }
        feed.stop()
        subscriber.stop()
        printer.cancel()
    }
}

/// The reference LCG (bench/WORKLOADS.md).
struct BenchRandom {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ bound: Int) -> Int {
        state = state &* 6364136223846793005 &+ 1442695040888963407
        return Int((state >> 33) % UInt64(bound))
    }
}

func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

func realtimeNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// Writes one line to stdout unbuffered, so a reading process sees it at once even through a pipe.
func emitLine(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    bytes.withUnsafeBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let written = write(1, buffer.baseAddress! + offset, buffer.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }
}

/// `FeedOpenOptions` with `--busy-timeout SECONDS` (1 or more) when given: how long a command waits for another
/// process's write lock before it fails as busy (the library's default is 5 s).
func busyTimeoutOptions(_ args: Arguments) throws -> FeedOpenOptions {
    var options = FeedOpenOptions()
    guard let text = args.optionalString("busy-timeout") else { return options }
    guard let seconds = Int(text), seconds >= 1 else { throw BenchError("--busy-timeout takes whole seconds, 1 or more, not \(text)") }
    options.busyTimeout = .seconds(seconds)
    return options
}

/// Milliseconds since `start` (`monotonicNanos()`), for failure messages.
func elapsedMillis(since start: UInt64) -> UInt64 { (monotonicNanos() - start) / 1_000_000 }
