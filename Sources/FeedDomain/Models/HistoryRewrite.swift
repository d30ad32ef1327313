/// The log stopped continuing the history this process followed: after a failover to a standby that lacked the
/// last commits (asynchronous replication), or a restored backup, seqs beyond the new log's head are gone, and seqs
/// it reassigned name different events.
///
/// ``EventBridge/historyRewrites`` sends one to each of its subscribers, in order with the events: everything before
/// it is the old history, everything after it follows ``head`` in the new one. What a subscriber built from events
/// after the fork is wrong: rebuild it from the tables, as after ``FeedError/historyPruned(after:prunedThrough:)``.
public struct HistoryRewrite: Sendable, Hashable {
    /// The highest seq this process had delivered or known of the old history.
    public let after: Int64
    /// The new log's last seq when the rewrite was found: delivery goes on after it.
    public let head: Int64

    /// A rewrite found at `head` by a process that had `after`.
    public init(after: Int64, head: Int64) {
        self.after = after
        self.head = head
    }

    /// The error a follower throws for it.
    public var error: FeedError { .historyRewritten(after: after, head: head) }
}
