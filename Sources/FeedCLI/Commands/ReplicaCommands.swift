/// `replica init --from LOCATION --user U`.
struct ReplicaInitCommand: Sendable, Hashable {
    /// The source: a SQLite file path or a `postgresql://` URL, as given.
    let source: String
}

/// `sync [--follow]`.
struct SyncCommand: Sendable, Hashable {
    /// Keep syncing as either side changes, until interrupted.
    let follow: Bool
}
