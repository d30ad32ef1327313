import FeedSync
import FeedCore
import FeedDependencies
import FeedDomain
import FeedPublishers
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// What the stress test compares once everything is quiet: the screens with the database, deliveries with the log.
extension ConcurrencyStressTests {
    // MARK: - Checks

    /// Every screen against a fresh query: counts and liked flags of loaded posts, no stray liked ids, nothing in
    /// flight, no error shown, and the last event that concerns it (`log`: every event since the screens were
    /// opened) applied.
    static func screenMismatches(
        feeds: [FeedScreen], details: [DetailScreen], service: FeedService, log: [EventRecord]
    ) throws(FeedError) -> [String] {
        var problems: [String] = []
        for feed in feeds {
            let state = feed.projection.state.value
            if state.posts.isEmpty { problems.append("\(feed.label): shows no posts") }
            if let last = log.last?.seq, state.lastAppliedSeq != last {
                problems.append("\(feed.label): applied events through seq \(state.lastAppliedSeq), the log ends at \(last)")
            }
            // Every event concerns a feed list, so its states must step through every seq of the log, in order.
            let trail = feed.applied.values(through: state.lastAppliedSeq)
            if let problem = trailProblem(feed.label, applied: trail, expected: log.map(\.seq)) {
                problems.append(problem)
            }
            let liked = try service.likedPostIDs(userID: feed.viewerID)
            for post in state.posts {
                let stored = try service.post(id: post.id, viewerID: feed.viewerID)
                if post.likeCount != stored.post.likeCount {
                    problems.append("\(feed.label): \(post.id) shows \(post.likeCount) likes, the database has \(stored.post.likeCount)")
                }
                if state.likedPostIDs.contains(post.id) != stored.liked {
                    problems.append("\(feed.label): \(post.id) shows liked = \(!stored.liked), the database says \(stored.liked)")
                }
            }
            let stray = state.likedPostIDs.subtracting(liked)
            if !stray.isEmpty {
                problems.append("\(feed.label): likedPostIDs holds \(stray.sorted()), which \(feed.viewerID) does not like")
            }
            if state.isLoading { problems.append("\(feed.label): still loading") }
            if let error = state.lastError { problems.append("\(feed.label): shows the error \(error)") }
        }
        for detail in details {
            let state = detail.projection.state.value
            let stored = try service.post(id: detail.postID, viewerID: detail.viewerID)
            if state.post == nil { problems.append("\(detail.label): not loaded") }
            // A detail screen applies its post's events in order; it may skip one older than its own command's answer.
            let applied = detail.applied.values(through: state.lastAppliedSeq)
            let postSeqs = Set(log.lazy.filter { $0.postID == detail.postID }.map(\.seq))
            if let i = applied.indices.dropFirst().first(where: { applied[$0] <= applied[$0 - 1] }) {
                problems.append("\(detail.label): applied seq \(applied[i]) after \(applied[i - 1])")
            }
            if let foreign = applied.first(where: { !postSeqs.contains($0) }) {
                problems.append("\(detail.label): applied seq \(foreign), which is not an event of \(detail.postID)")
            }
            if let last = log.last(where: { $0.postID == detail.postID })?.seq, state.lastAppliedSeq != last {
                problems.append("\(detail.label): applied events through seq \(state.lastAppliedSeq), the post's last event is \(last)")
            }
            if state.likeCount != stored.post.likeCount {
                problems.append("\(detail.label): shows \(state.likeCount) likes, the database has \(stored.post.likeCount)")
            }
            if state.liked != stored.liked {
                problems.append("\(detail.label): shows liked = \(state.liked), the database says \(stored.liked)")
            }
            if state.isBusy { problems.append("\(detail.label): still busy") }
            if let error = state.lastError { problems.append("\(detail.label): shows the error \(error)") }
        }
        return problems
    }

    /// Describes how the seqs a screen applied differ from `expected`, or `nil` when they are the same.
    static func trailProblem(_ label: String, applied: [Int64], expected: [Int64]) -> String? {
        guard applied != expected else { return nil }
        let common = min(applied.count, expected.count)
        let i = (0..<common).first { applied[$0] != expected[$0] } ?? common
        let appliedAt = i < applied.count ? "seq \(applied[i])" : "nothing"
        let expectedAt = i < expected.count ? "seq \(expected[i])" : "nothing"
        let missing = Set(expected).subtracting(applied).count
        return "\(label): its states stepped through \(applied.count) events, the log has \(expected.count) (\(missing) never applied); "
            + "the first difference is at #\(i): applied \(appliedAt), the log has \(expectedAt)"
    }

    /// The delivered seqs must be the log's, in strictly increasing order, each once, none missing.
    static func logProblems(delivered: [Int64], log: [Int64]) -> [String] {
        var problems: [String] = []
        if let first = log.first, let last = log.last, log.count != Int(last - first + 1) {
            problems.append("the log itself has gaps between \(first) and \(last): \(log.count) events")
        }
        if let i = delivered.indices.dropFirst().first(where: { delivered[$0] <= delivered[$0 - 1] }) {
            problems.append("not strictly increasing: seq \(delivered[i]) delivered after \(delivered[i - 1]) (delivery #\(i))")
        }
        let repeated = Dictionary(delivered.map { ($0, 1) }, uniquingKeysWith: +).filter { $0.value > 1 }.keys.sorted()
        if !repeated.isEmpty { problems.append("delivered more than once: \(repeated.prefix(10)) (\(repeated.count) seqs)") }
        let deliveredSet = Set(delivered)
        let missing = log.filter { !deliveredSet.contains($0) }
        if !missing.isEmpty { problems.append("never delivered: \(missing.prefix(10)) (\(missing.count) of \(log.count) events)") }
        let logSet = Set(log)
        let unknown = delivered.filter { !logSet.contains($0) }
        if !unknown.isEmpty { problems.append("delivered but not in the log: \(unknown.prefix(10))") }
        return problems
    }
}
