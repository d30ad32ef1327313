import FeedCore
import FeedDomain
import FeedSync
import Foundation

/// A like: who, which post.
struct LikeOf: Hashable, Sendable, Comparable {
    let user: String
    let post: String

    static func < (a: LikeOf, b: LikeOf) -> Bool { (a.post, a.user) < (b.post, b.user) }
}

/// A follower's state, built by applying the log's events in order: the posts with their counts (from each event's
/// `likeCount`), the likes (an event whose user id is empty, an erased user's, changes none), the deleted posts.
struct LogReplay: Sendable {
    var counts: [String: Int] = [:]
    var likes = Set<LikeOf>()
    var deleted = Set<String>()
    var lastSeq: Int64 = 0
    /// Seqs that did not follow the one before.
    var gaps: [Int64] = []

    mutating func apply(_ event: EventRecord) {
        if event.seq != lastSeq + 1 { gaps.append(event.seq) }
        lastSeq = event.seq
        guard let post = event.postID else { return }
        switch event.kind {
        case .postCreated:
            counts[post] = 0
        case .liked, .unliked:
            if !event.userID.isEmpty {
                let like = LikeOf(user: event.userID, post: post)
                if event.kind == .liked { likes.insert(like) } else { likes.remove(like) }
            }
            counts[post] = event.likeCount
        case .postDeleted:
            counts[post] = nil
            likes = likes.filter { $0.post != post }
            deleted.insert(post)
        case .userCreated, .userDeleted, .likeCountChanged:
            break
        }
    }
}

/// The database after a deletion stress run, with the agents' output lines, and what must hold of them.
struct DeletionStressOutcome {
    let log: [EventRecord]
    let lines: [String]
    let counts: [String: Int]
    let likes: Set<LikeOf>
    let users: Set<String>
    let tombstones: Set<String>

    init(service: FeedService, log: [EventRecord], lines: [String]) throws {
        self.log = log
        self.lines = lines
        func texts(_ sql: String) throws -> [String] {
            try service.firstColumn(sql).compactMap { value -> String? in if case .text(let text) = value { text } else { nil } }
        }
        counts = Dictionary(
            uniqueKeysWithValues: try texts("SELECT id || ' ' || like_count FROM posts").map { row in
                let words = row.split(separator: " ")
                return (String(words[0]), Int(words[1]) ?? -1)
            })
        likes = Set(
            try texts(
                "SELECT u.id || ' ' || p.id FROM likes l JOIN users u ON u.user_key = l.user_key JOIN posts p ON p.post_key = l.post_key"
            )
            .map { row in
                let words = row.split(separator: " ")
                return LikeOf(user: String(words[0]), post: String(words[1]))
            })
        users = Set(try texts("SELECT id FROM users"))
        tombstones = Set(try texts("SELECT id FROM deleted_posts"))
    }

    private var acks: [[Substring]] { lines.map { $0.split(separator: " ") } }

    /// What the run's figures were, for the test's output.
    var summary: String {
        let words = acks
        let changes = words.filter { $0.first == "ack" && $0[1] != "0" }.count
        let deletions = words.filter { $0.first == "deleted" }.count
        let erasures = words.filter { $0.first == "erased" }.count
        let refused = words.filter { $0.first == "refused" }.count
        return "\(lines.count) acknowledged commands (\(changes) like changes, \(deletions) post deletions, \(erasures) erasures, "
            + "\(refused) refused); \(tombstones.count) posts deleted, \(DeletionStressTests.users - users.count) users erased, "
            + "\(likes.count) likes left"
    }

    /// Everything that does not hold; empty when the run kept every promise. `live` is the change stream's follower.
    func problems(live: LogReplay) -> [String] {
        var problems: [String] = []
        func expect(_ condition: Bool, _ problem: @autoclosure () -> String) {
            if !condition && problems.count < 40 { problems.append(problem()) }
        }
        // Counts equal likes; no like or post names a deleted post or an erased user; nothing deleted reappears.
        for (post, count) in counts.sorted(by: { $0.key < $1.key }) {
            let rows = likes.filter { $0.post == post }.count
            expect(count == rows, "post \(post) has like_count \(count) but \(rows) likes")
        }
        expect(Set(counts.keys).isDisjoint(with: tombstones), "deleted posts have rows: \(tombstones.intersection(counts.keys).sorted())")
        expect(likes.allSatisfy { counts[$0.post] != nil && users.contains($0.user) }, "a like names a deleted post or an erased user")
        let allPosts = Set((1...DeletionStressTests.posts).map { "post\($0)" })
        expect(Set(counts.keys).union(tombstones) == allPosts, "every post is either there or deleted")
        let allUsers = Set((1...DeletionStressTests.users).map { "user\($0)" })
        let erased = allUsers.subtracting(users)
        expect(users.isSubset(of: allUsers), "no user appeared: \(users.subtracting(allUsers).sorted())")
        expect(
            erased.allSatisfy { Int($0.dropFirst(4))! <= DeletionStressTests.erasable },
            "only erasable users are gone: \(erased.sorted())")
        expect(!log.contains { erased.contains($0.userID) }, "the log names an erased user")
        let deletedAt = Dictionary(log.filter { $0.kind == .postDeleted }.map { ($0.postID ?? "", $0.seq) }, uniquingKeysWith: min)
        expect(Set(deletedAt.keys) == tombstones, "one postDeleted event per tombstone")
        expect(
            !log.contains { event in event.postID.flatMap { deletedAt[$0] }.map { event.seq > $0 } ?? false },
            "an event names a post after its postDeleted event")

        // A follower's replay of the whole log, and the change stream that ran throughout, give the final state
        // (the stream read some events before their user was erased: it keeps those users' likes, whose counts it
        // still got right).
        var full = LogReplay()
        for event in log { full.apply(event) }
        expect(full.gaps.isEmpty, "the log has gaps at \(full.gaps.prefix(5))")
        expect(full.counts == counts, "replaying the log gives other counts")
        expect(full.likes == likes, "replaying the log gives other likes: \(full.likes.symmetricDifference(likes).sorted().prefix(5))")
        expect(full.deleted == tombstones, "replaying the log gives other deleted posts")
        expect(live.lastSeq == log.last?.seq, "the change stream stopped at seq \(live.lastSeq)")
        expect(live.gaps.isEmpty, "the change stream skipped at \(live.gaps.prefix(5))")
        expect(live.counts == counts, "the change stream gives other counts")
        expect(live.likes.filter { users.contains($0.user) } == likes, "the change stream gives other likes")
        expect(live.deleted == tombstones, "the change stream gives other deleted posts")

        // Every acknowledged command's effect is there.
        let bySeq = Dictionary(log.map { ($0.seq, $0) }, uniquingKeysWith: { first, _ in first })
        var lastChange: [LikeOf: Int64] = [:]
        for event in log where event.kind == .liked || event.kind == .unliked {
            lastChange[LikeOf(user: event.userID, post: event.postID ?? "")] = event.seq
        }
        for words in acks {
            let line = words.joined(separator: " ")
            switch words.first {
            case "ack" where words.count == 5 && words[1] != "0":
                let (seq, kind, user, post) = (Int64(words[1]) ?? 0, String(words[2]), String(words[3]), String(words[4]))
                let event = bySeq[seq]
                let survivor = users.contains(user)
                expect(
                    event?.kind.rawValue == kind && event?.postID == post && event?.userID == (survivor ? user : ""),
                    "\(line): the log has \(event.map { "\($0.kind) \($0.userID) \($0.postID ?? "-")" } ?? "nothing")")
                if kind == "liked" && survivor && counts[post] != nil && lastChange[LikeOf(user: user, post: post)] == seq {
                    expect(likes.contains(LikeOf(user: user, post: post)), "\(line): the like is missing")
                }
            case "deleted" where words.count == 3:
                expect(tombstones.contains(String(words[1])), "\(line): no tombstone")
                if let seq = Int64(words[2]), seq > 0 {
                    expect(bySeq[seq]?.kind == .postDeleted && bySeq[seq]?.postID == String(words[1]), "\(line): no such event")
                }
            case "erased" where words.count == 3:
                expect(!users.contains(String(words[1])), "\(line): the user is there")
                if let seq = Int64(words[2]), seq > 0 { expect(bySeq[seq]?.kind == .userDeleted, "\(line): no such event") }
            case "refused" where words.count == 4:
                if words[1] == "postNotFound" { expect(tombstones.contains(String(words[3])), "\(line): the post was not deleted") }
                if words[1] == "userNotFound" { expect(!users.contains(String(words[2])), "\(line): the user was not erased") }
            case "ack":
                break
            default:
                expect(false, "unexpected line: \(line)")
            }
        }
        return problems
    }
}
