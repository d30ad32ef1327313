package import Foundation

/// The source's side of replica sync: its clients' records (`sync_clients`, `sync_rejections`) and the reads a pull
/// step makes, each a constant number of statements whatever the step's size.
///
/// Implemented by both backends' transactions; the domain reaches it through ``FeedTransaction/syncSource``.
package protocol FeedSyncSource: AnyObject {
    /// A client's record, or `nil` before its first push.
    func syncClient(_ clientID: String) throws -> SyncClientRecord?
    /// The client's record for a push by `userID`: created on the first push, its row locked until the transaction
    /// ends (so two pushes of one client apply one after the other). The caller checks the record's user.
    func claimSyncClient(_ clientID: String, userID: String, at time: Date) throws -> SyncClientRecord
    /// Records the client's highest handled mutation number and the log's last seq at this commit.
    func recordSyncHandled(clientID: String, through number: Int64, lastSeq: Int64) throws
    /// Records mutations refused for good (a refusal recorded already is kept as it was).
    func recordSyncRejections(_ rejections: [SyncRejectionRecord], clientID: String, at time: Date) throws
    /// The client's refusals with numbers in `numbers`, in number order.
    func syncRejections(clientID: String, numbers: ClosedRange<Int64>) throws -> [SyncRejectionRecord]
    /// Which of `ids` name a post.
    func existingPostIDs(_ ids: [String]) throws -> Set<String>
    /// Up to `limit` events with `seq > after`, in order, each with what a replica needs of it: the created user's
    /// name, the created post's body. One statement.
    func syncEvents(after seq: Int64, limit: Int) throws -> [SyncSourceEvent]
    /// A snapshot's users: up to `limit` with ids after `id` (from the first when `nil`), ordered by id.
    func snapshotUsers(after id: String?, limit: Int) throws -> [User]
    /// A snapshot's posts: up to `limit` after `cursor` (from the oldest when `nil`), oldest first (ties by insertion
    /// order), each with whether the viewer likes it.
    func snapshotPosts(viewerKey: Int64, after cursor: FeedCursor?, limit: Int) throws -> [FeedRow]
}

/// What the source keeps of one replica client.
package struct SyncClientRecord: Sendable, Hashable {
    /// The user the client belongs to, for good.
    package let userID: String
    /// The highest mutation number handled (applied or refused).
    package let lastMutation: Int64
    /// The log's last seq when that number was handled.
    package let lastMutationSeq: Int64

    package init(userID: String, lastMutation: Int64, lastMutationSeq: Int64) {
        self.userID = userID
        self.lastMutation = lastMutation
        self.lastMutationSeq = lastMutationSeq
    }
}

/// A mutation refused for good, and why.
package struct SyncRejectionRecord: Sendable, Hashable {
    package let number: Int64
    package let reason: String

    package init(number: Int64, reason: String) {
        self.number = number
        self.reason = reason
    }
}

/// An event of the log with what a replica needs of the row it created.
package struct SyncSourceEvent: Sendable, Hashable {
    package let record: EventRecord
    /// The created user's name (``EventKind/userCreated``), `nil` otherwise or when the user is gone.
    package let userName: String?
    /// The created post's body (``EventKind/postCreated``), `nil` otherwise or when the post is gone.
    package let postBody: String?

    package init(record: EventRecord, userName: String?, postBody: String?) {
        self.record = record
        self.userName = userName
        self.postBody = postBody
    }
}
