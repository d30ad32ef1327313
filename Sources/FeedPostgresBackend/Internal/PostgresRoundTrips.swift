package import Synchronization

/// Round trips to a server made by every connection of this process: each statement, prepare and `COPY` step sent
/// (what ``PostgresConnection`` waits for an answer to). feedsync-bench divides its change over a run by the run's
/// operations (`round_trips_per_op`).
package enum PostgresRoundTrips {
    /// The round trips sent so far.
    package static let sent = Atomic<Int>(0)
}
