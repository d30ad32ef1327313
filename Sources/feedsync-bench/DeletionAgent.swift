import FeedSync
import Foundation

/// The helper process of the deletion stress test (`DeletionStressTests`); not a workload itself. It takes a SQLite
/// path or a `postgresql://` URL and never prints the location.
///
/// `agent-delete --db LOCATION --seed K [--users 30] [--posts 120] [--erasable 1-8] [--delete-permille 10]
/// [--erase-permille 2] [--busy-timeout SECONDS]` runs random commands until killed: mostly like / unlike / toggle
/// by `user1`…`userU` on `post1`…`postP`, `delete-permille` ‰ post deletions by the operator, `erase-permille` ‰
/// erasures of a user in the `erasable` range. After each command returns it prints and flushes one line:
///
/// - `ack SEQ KIND USER POST` for a like or unlike that changed something (KIND `liked`, `unliked`), `ack 0 none
///   USER POST` for one that changed nothing;
/// - `deleted POST SEQ` once the post is deleted (SEQ 0: it was deleted before);
/// - `erased USER SEQ` once the user is gone (SEQ 0: there was no such user any more);
/// - `refused CASE USER POST` for a like or unlike refused because the post was deleted (`postNotFound`) or the user
///   erased (`userNotFound`), as it must be;
/// - `error CATEGORY CASE` for any other failure (the test fails on it); the agent goes on.
enum DeletionAgent {
    static func run(_ args: Arguments) throws {
        let location = args.string("db", "")
        let seed = try args.int("seed", 1)
        let users = try args.int("users", 30)
        let posts = try args.int("posts", 120)
        let erasable = args.string("erasable", "1-8").split(separator: "-").compactMap { Int($0) }
        let deletePermille = try args.int("delete-permille", 10)
        let erasePermille = try args.int("erase-permille", 2)
        let options = try busyTimeoutOptions(args)
        try args.finish()
        guard !location.isEmpty else { throw BenchError("agent-delete needs --db LOCATION") }
        guard users > 0, posts > 0, erasable.count == 2, erasable[0] >= 1, erasable[0] <= erasable[1] else {
            throw BenchError("agent-delete needs --users and --posts of 1 or more and --erasable A-B (1 <= A <= B)")
        }
        let service = try FeedService(location: location, options: options)
        // Closed before the process exits: its connections' threads must not run while libpq's and OpenSSL's exit
        // handlers free what they use.
        defer { service.close() }
        var random = BenchRandom(seed: UInt64(seed) &* 15_485_863 &+ 7)
        while true {
            let user = "user\(1 + random.next(users))"
            let post = "post\(1 + random.next(posts))"
            let roll = random.next(1000)
            do {
                if roll < erasePermille {
                    let victim = "user\(erasable[0] + random.next(erasable[1] - erasable[0] + 1))"
                    let erasure = try service.deleteUser(userID: victim)
                    emitLine("erased \(victim) \(erasure.seq ?? 0)")
                } else if roll < erasePermille + deletePermille {
                    let deletion = try service.deletePost(postID: post, by: nil)
                    emitLine("deleted \(post) \(deletion.seq ?? 0)")
                } else {
                    emitLine(try likeAck(service, user: user, post: post, roll: roll))
                }
            } catch .postNotFound(post) {
                emitLine("refused postNotFound \(user) \(post)")
            } catch .userNotFound(user) {
                emitLine("refused userNotFound \(user) \(post)")
            } catch {
                emitLine("error \(error.category) \(FaultAgents.caseName(error))")
            }
        }
    }
}
