package import FeedCore
internal import Foundation

/// What the last few thousand events a process handled looked like, by seq: enough to tell that a seq now names a
/// different event (the log was rewritten after a failover or a restore) when the same seq comes back.
///
/// An event is identified by what no later change to the log alters: its kind, post, like count and commit time —
/// not its user id, which an erasure scrubs from earlier events. Two different events at one seq that agree on all
/// of these (the same kind on the same post with the same count, committed in the same millisecond) are not told
/// apart.
struct RecentEvents {
    /// How many seqs are remembered: more than a failover to an asynchronous standby loses.
    static let capacity = 256

    /// Made at the first event: a service that commits nothing never pays for it.
    private var slots: [(seq: Int64, print: Int)] = []

    /// What a seq was seen as, compared with an event now.
    enum Match {
        case same
        case different
        case unknown
    }

    /// Remembers `events`.
    mutating func record<Events: Sequence>(_ events: Events) where Events.Element == EventRecord {
        for event in events {
            if slots.isEmpty { slots = Array(repeating: (-1, 0), count: Self.capacity) }
            slots[Self.slot(event.seq)] = (event.seq, Self.print(event))
        }
    }

    /// Whether `event`'s seq was seen as this event.
    func match(_ event: EventRecord) -> Match {
        guard !slots.isEmpty else { return .unknown }
        let slot = slots[Self.slot(event.seq)]
        guard slot.seq == event.seq else { return .unknown }
        return slot.print == Self.print(event) ? .same : .different
    }

    /// The first of `events` whose seq was seen as another event.
    func firstDifferent<Events: Sequence>(in events: Events) -> EventRecord? where Events.Element == EventRecord {
        events.first { match($0) == .different }
    }

    /// Forgets everything (after a rewrite, the old history's seqs mean nothing).
    mutating func removeAll() {
        slots = []
    }

    private static func slot(_ seq: Int64) -> Int { Int(UInt64(bitPattern: seq) % UInt64(capacity)) }

    private static func print(_ event: EventRecord) -> Int {
        var hasher = Hasher()
        hasher.combine(event.kind)
        hasher.combine(event.postID)
        hasher.combine(event.likeCount)
        hasher.combine(event.milliseconds)
        return hasher.finalize()
    }
}

extension EventRecord {
    /// The commit time as the log stores it, in whole milliseconds since 1970.
    var milliseconds: Int64 { Int64((at.timeIntervalSince1970 * 1000).rounded()) }

    /// Whether `other` is this event as the log may hold it later: the same seq, kind, post, count and time (the
    /// user id may have been scrubbed by an erasure since).
    package func isSameEvent(as other: EventRecord) -> Bool {
        seq == other.seq && kind == other.kind && postID == other.postID && likeCount == other.likeCount
            && milliseconds == other.milliseconds
    }
}
