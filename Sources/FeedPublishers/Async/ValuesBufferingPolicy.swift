/// How `values` buffers values that arrive while the consuming loop is busy.
///
/// ```swift
/// for await event in publisher.values(bufferingPolicy: .bounded(100, whenFull: .dropOldest)) { … }
/// ```
public enum ValuesBufferingPolicy: Sendable, Hashable {
    /// Keep every value until the consumer takes it (the default; lossless, memory grows with the backlog).
    case unbounded

    /// Keep at most `limit` values not yet taken by the iterator; when full, apply `whenFull`.
    ///
    /// The iterator takes buffered values in batches, so up to `limit` more values may sit in
    /// the iterator's own batch. Dropped values are counted in `droppedCount`.
    case bounded(Int, whenFull: Overflow)

    /// What a full bounded buffer does with a new value.
    public enum Overflow: Sendable, Hashable {
        /// Discard the oldest buffered value to make room for the new one (keeps the newest).
        case dropOldest

        /// Discard the new value (keeps the oldest).
        case dropNewest
    }
}
