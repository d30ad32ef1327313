/// `events [--since SEQ] [--limit N] [--follow]`.
struct EventsCommand: Sendable, Hashable {
    /// Print events with a seq greater than this.
    let since: Int64
    /// At most this many (from the log; `--follow` then keeps going), all when `nil`.
    let limit: Int?
    /// Keep printing new events until interrupted.
    let follow: Bool
}
