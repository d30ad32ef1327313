/// How far the event log can replay the tables: events up to ``prunedThrough`` were pruned, and likes were
/// bulk-loaded without events ``bulkGeneration`` times, the latest when the log ended at ``bulkThrough``.
///
/// A durable subscriber can replay from its cursor only if it missed neither: see ``rebuildPoint(for:)``.
public struct ReplayBaseline: Sendable, Hashable {
    /// The highest seq removed by pruning (0 while the log is complete from seq 1).
    public let prunedThrough: Int64
    /// How many bulk loads wrote likes outside the log (0 when none did).
    public let bulkGeneration: Int64
    /// The log's last seq when the latest bulk load committed (0 when none did).
    public let bulkThrough: Int64

    /// A baseline from its parts.
    public init(prunedThrough: Int64, bulkGeneration: Int64, bulkThrough: Int64) {
        self.prunedThrough = prunedThrough
        self.bulkGeneration = bulkGeneration
        self.bulkThrough = bulkThrough
    }

    /// The seq through which a subscriber at `position` cannot replay what it missed — its cursor is behind the
    /// pruning mark, or its state predates the latest bulk load — or `nil` when replaying from its cursor is
    /// enough.
    public func rebuildPoint(for position: SubscriberPosition) -> Int64? {
        var point: Int64?
        if position.lastSeq < prunedThrough { point = prunedThrough }
        if position.bulkGeneration < bulkGeneration { point = max(point ?? 0, bulkThrough) }
        return point
    }
}
