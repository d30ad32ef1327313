public import Foundation

/// The kind of a change recorded in the event log.
public enum EventKind: String, Sendable, Hashable, Codable, CaseIterable {
    /// A user liked a post.
    case liked
    /// A user took a like back.
    case unliked
    /// A post was created.
    case postCreated
    /// A user was created.
    case userCreated
    /// On a replica: the post's like count changed through likes of other users, whose ids a replica never receives
    /// (``EventRecord/userID`` is empty).
    case likeCountChanged
    /// A post was deleted, with its likes (``EventRecord/userID`` is its author, or empty when the author was erased).
    case postDeleted
    /// A user was erased (``EventRecord/userID`` is empty: the log names an erased user nowhere, this event included).
    case userDeleted
}

/// One row of the append-only event log.
public struct EventRecord: Sendable, Hashable, Codable {
    /// The position in the log: strictly increasing, gap-free in commit order, never reused.
    public let seq: Int64
    /// What happened.
    public let kind: EventKind
    /// The acting user (the liker, the author, or the created user); empty for ``EventKind/likeCountChanged`` and
    /// ``EventKind/userDeleted``, and in every event of a user who was erased since.
    public let userID: String
    /// The post concerned; `nil` for ``EventKind/userCreated`` and ``EventKind/userDeleted``.
    public let postID: String?
    /// The post's like count after the change, for likes, unlikes and count changes.
    public let likeCount: Int?
    /// When the change was committed.
    public let at: Date

    /// Creates an event record.
    public init(seq: Int64, kind: EventKind, userID: String, postID: String?, likeCount: Int?, at: Date) {
        self.seq = seq
        self.kind = kind
        self.userID = userID
        self.postID = postID
        self.likeCount = likeCount
        self.at = at
    }
}

extension EventRecord {
    /// The event as `viewerID` may see it — the one rule for every per-user view of the log (a replica's pull, an
    /// HTTP event stream): the viewer's own likes and unlikes as they are, another user's as a
    /// ``EventKind/likeCountChanged`` with no user id; every other event unchanged (a post's author and a user's
    /// creation are public).
    public func seen(by viewerID: String?) -> EventRecord {
        guard kind == .liked || kind == .unliked, userID != viewerID else { return self }
        return EventRecord(seq: seq, kind: .likeCountChanged, userID: "", postID: postID, likeCount: likeCount, at: at)
    }

    /// Whether ``seen(by:)`` shows this event differently to its own user than to everyone else.
    public var isPrivateToItsUser: Bool {
        (kind == .liked || kind == .unliked) && !userID.isEmpty
    }
}

extension EventRecord {
    /// A check value of what no later change to the log alters in this event — its kind, post, like count and commit
    /// millisecond (not its user id, which an erasure scrubs) — the same in every process and on every machine: a
    /// position kept outside a process (a replica's cursor) carries it, so that the source can tell whether its seq
    /// still names this event. 32 bits of FNV-1a, as an `Int64`.
    package var check: Int64 {
        var hash: UInt32 = 2_166_136_261
        func mix<Bytes: Sequence>(_ bytes: Bytes) where Bytes.Element == UInt8 {
            for byte in bytes { hash = (hash ^ UInt32(byte)) &* 16_777_619 }
        }
        mix(kind.rawValue.utf8)
        mix([0])
        mix((postID ?? "").utf8)
        mix([0])
        mix(String(likeCount ?? -1).utf8)
        mix([0])
        mix(String(Int64((at.timeIntervalSince1970 * 1000).rounded())).utf8)
        return Int64(hash)
    }
}
