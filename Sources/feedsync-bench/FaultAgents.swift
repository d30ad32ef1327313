import FeedSync
import Foundation

/// Helper processes for the fault tests (`PostgresFaultTests`); not workloads themselves. Both take a SQLite path
/// or a `postgresql://` URL; neither ever prints the location.
///
/// - `agent-random --db LOCATION --seed K [--count 5000] [--users 20] [--posts 50] [--busy-timeout SECONDS]`: `count`
///   random commands, each its own transaction — mostly like / unlike / toggle of a seeded user and post (or a post this agent created),
///   about 2 % `createPost` (id `rK-N`), about 5 % invalid ones that must fail with a typed data error (an unknown
///   post or user, an id with a space, a post id that exists already). Prints `progress K N` every 250 commands and one
///   final line
///   `done K count C changed H unchanged U posts P refused R unexpected E` and exits 1 when E > 0 (a valid command
///   failed, or an invalid one succeeded or failed in the wrong way; each is described on stderr).
/// - `agent-acks --db LOCATION --seed K --users A-B [--posts 50] [--count 0] [--rate 0] [--response-timeout MS]`:
///   runs random like / unlike /
///   toggle commands by users `userA`…`userB` (about 3 % `createPost`) until killed, or `count` commands when
///   `count > 0`, at most `rate` per second when `rate > 0`. After each command returns it prints and flushes
///   one line: `ack SEQ KIND USER POST` for a change (KIND `liked`, `unliked`), `ack 0 none USER POST` for a
///   command that changed nothing, `post ID USER` for a created post. A failed command prints
///   `error CATEGORY CASE` (category `data`, `database` or `busy`; the case name only, never a description) and the
///   agent goes on; with `--stop-on-error 1` it exits 1 instead. Without it, opening the database is retried for up
///   to 60 s while it fails with a `busy` error (no connection). `--response-timeout` replaces the library's 20 s
///   PostgreSQL response timeout (network fault tests).
enum FaultAgents {
    /// Runs the agent named by `args.command` (`agent-random` or `agent-acks`).
    static func run(_ args: Arguments) throws {
        switch args.command {
        case "agent-random": try random(args)
        case "agent-acks": try acks(args)
        default: throw BenchError("unknown fault agent \(args.command)")
        }
    }

    static func random(_ args: Arguments) throws {
        let location = args.string("db", "")
        let seed = try args.int("seed", 1)
        let count = try args.int("count", 5000)
        let users = try args.int("users", 20)
        let posts = try args.int("posts", 50)
        let options = try busyTimeoutOptions(args)
        try args.finish()
        guard !location.isEmpty else { throw BenchError("agent-random needs --db LOCATION") }
        guard users > 0, posts > 0 else { throw BenchError("agent-random needs --users and --posts of 1 or more") }
        let service = try FeedService(location: location, options: options)
        // Closed before the process exits: its connections' threads must not run while libpq's and OpenSSL's exit
        // handlers free what they use.
        defer { service.close() }
        var random = BenchRandom(seed: UInt64(seed) &* 7919 &+ 17)
        var created: [String] = []
        var changed = 0
        var unchanged = 0
        var refused = 0
        var unexpected = 0

        func unexpectedFailure(_ what: String) {
            unexpected += 1
            if unexpected <= 20 { FileHandle.standardError.write(Data("agent-random \(seed): \(what)\n".utf8)) }
        }

        for n in 1...max(count, 1) where count > 0 {
            if n % 250 == 0 { emitLine("progress \(seed) \(n)") }
            let user = "user\(1 + random.next(users))"
            let pick = random.next(posts + created.count)
            let post = pick < posts ? "post\(1 + pick)" : created[pick - posts]
            let roll = random.next(100)
            if roll < 5 {
                // Invalid: must fail with the matching typed data error and change nothing.
                let (command, expected): (() throws(FeedError) -> Void, (FeedError) -> Bool) =
                    switch random.next(4) {
                    case 0:
                        (
                            { () throws(FeedError) in _ = try service.like(userID: user, postID: "missing-\(n)") },
                            { if case .postNotFound("missing-\(n)") = $0 { true } else { false } }
                        )
                    case 1:
                        (
                            { () throws(FeedError) in _ = try service.toggle(userID: "nobody-\(n)", postID: post) },
                            { if case .userNotFound("nobody-\(n)") = $0 { true } else { false } }
                        )
                    case 2:
                        (
                            { () throws(FeedError) in _ = try service.unlike(userID: user, postID: "bad id \(n)") },
                            { if case .invalidValue = $0 { true } else { false } }
                        )
                    default:
                        (
                            { () throws(FeedError) in _ = try service.createPost(id: "post1", authorID: user, body: "dup") },
                            { if case .postAlreadyExists("post1") = $0 { true } else { false } }
                        )
                    }
                do {
                    try command()
                    unexpectedFailure("invalid command #\(n) succeeded")
                } catch {
                    if expected(error) && error.category == .data {
                        refused += 1
                    } else {
                        unexpectedFailure("invalid command #\(n) failed with an unexpected error: \(error)")
                    }
                }
                continue
            }
            let started = monotonicNanos()
            do {
                if roll < 7 {
                    let id = "r\(seed)-\(n)"
                    try service.createPost(id: id, authorID: user, body: "post \(n) of agent \(seed)")
                    created.append(id)
                    continue
                }
                let result =
                    switch roll % 3 {
                    case 0: try service.like(userID: user, postID: post)
                    case 1: try service.unlike(userID: user, postID: post)
                    default: try service.toggle(userID: user, postID: post)
                    }
                if result.changed { changed += 1 } else { unchanged += 1 }
            } catch {
                unexpectedFailure("command #\(n) (\(user), \(post)) failed after \(elapsedMillis(since: started)) ms: \(error)")
            }
        }
        emitLine(
            "done \(seed) count \(count) changed \(changed) unchanged \(unchanged) posts \(created.count) refused \(refused) unexpected \(unexpected)"
        )
        if unexpected > 0 {
            service.close()
            exit(1)
        }
    }

    /// Opens the service; when `retrying`, a failure that may pass (category `busy`: no connection yet, a network
    /// fault test's slow or broken network) is tried again every 200 ms for up to 60 s, as a writer that must keep
    /// going would, instead of ending the agent before its first command.
    private static func openService(_ location: String, _ options: FeedOpenOptions, retrying: Bool) throws -> FeedService {
        let deadline = ContinuousClock.now + .seconds(60)
        while true {
            do {
                return try FeedService(location: location, options: options)
            } catch {
                guard retrying, error.category == .busy, ContinuousClock.now < deadline else { throw error }
                usleep(200_000)  // a reconnect's pause, as the library's own change watch makes
            }
        }
    }

    static func acks(_ args: Arguments) throws {
        let location = args.string("db", "")
        let seed = try args.int("seed", 1)
        let userRange = args.string("users", "1-10")
        let posts = try args.int("posts", 50)
        let count = try args.int("count", 0)
        let rate = try args.int("rate", 0)
        let stopOnError = try args.int("stop-on-error", 0) != 0
        let responseTimeout = try args.int("response-timeout", 0)
        try args.finish()
        guard !location.isEmpty else { throw BenchError("agent-acks needs --db LOCATION") }
        let bounds = userRange.split(separator: "-").compactMap { Int($0) }
        guard bounds.count == 2, bounds[0] >= 1, bounds[0] <= bounds[1], posts > 0 else {
            throw BenchError("agent-acks needs --users A-B (1 <= A <= B) and --posts 1 or more")
        }
        var options = FeedOpenOptions()
        if responseTimeout > 0 { options.responseTimeout = .milliseconds(responseTimeout) }
        let service = try openService(location, options, retrying: !stopOnError)
        // Closed before the process exits: its connections' threads must not run while libpq's and OpenSSL's exit
        // handlers free what they use.
        defer { service.close() }
        var random = BenchRandom(seed: UInt64(seed) &* 104_729 &+ UInt64(getpid()))
        let interval = rate > 0 ? 1_000_000_000 / UInt64(rate) : 0
        let start = monotonicNanos()
        var n = 0
        while count == 0 || n < count {
            n += 1
            if interval > 0 {
                let due = start + UInt64(n - 1) * interval
                let now = monotonicNanos()
                if due > now { usleep(UInt32((due - now) / 1000)) }
            }
            let user = "user\(bounds[0] + random.next(bounds[1] - bounds[0] + 1))"
            let post = "post\(1 + random.next(posts))"
            let roll = random.next(100)
            do {
                if roll < 3 {
                    let id = "a\(seed)-\(getpid())-\(n)"
                    try service.createPost(id: id, authorID: user, body: "post \(n)")
                    emitLine("post \(id) \(user)")
                    continue
                }
                emitLine(try likeAck(service, user: user, post: post, roll: roll))
            } catch {
                emitLine("error \(error.category) \(caseName(error))")
                if stopOnError { exit(1) }
            }
        }
    }

    /// The error's case name (`connectionLost`, `postNotFound`, …) without its payload, which may name a location;
    /// for `.storage`, the storage error's case (`database` with its SQLSTATE).
    static func caseName(_ error: FeedError) -> String {
        if case .storage(let storage) = error {
            if case .database(let failure) = storage { return "database(\(failure.code))" }
            return label(of: storage)
        }
        return label(of: error)
    }

    /// The case name of an enum value with a payload (the label reflection gives it).
    private static func label(of value: Any) -> String {
        Mirror(reflecting: value).children.first?.label ?? "\(type(of: value))"
    }
}

/// Likes, unlikes or toggles (by `roll`) and answers the agent's acknowledgement line: `ack SEQ liked|unliked USER
/// POST`, or `ack 0 none USER POST` when nothing changed.
func likeAck(_ service: FeedService, user: String, post: String, roll: Int) throws(FeedError) -> String {
    let result =
        switch roll % 3 {
        case 0: try service.like(userID: user, postID: post)
        case 1: try service.unlike(userID: user, postID: post)
        default: try service.toggle(userID: user, postID: post)
        }
    guard let seq = result.seq else { return "ack 0 none \(user) \(post)" }
    return "ack \(seq) \(result.liked ? "liked" : "unliked") \(user) \(post)"
}
