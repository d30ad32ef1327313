/// Where a durable subscriber stands: the last event seq it applied and the bulk loads its state already includes.
public struct SubscriberPosition: Sendable, Hashable {
    /// The last seq applied (0 when it never ran).
    public let lastSeq: Int64
    /// The ``ReplayBaseline/bulkGeneration`` its state includes: the value at its last rebuild, 0 before any.
    public let bulkGeneration: Int64

    /// A position; `SubscriberPosition.start` is the one of a subscriber that never ran.
    public init(lastSeq: Int64, bulkGeneration: Int64) {
        self.lastSeq = lastSeq
        self.bulkGeneration = bulkGeneration
    }

    /// A subscriber that never stored a cursor: nothing applied, no bulk load included.
    public static let start = SubscriberPosition(lastSeq: 0, bulkGeneration: 0)
}
