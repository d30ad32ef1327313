/// `replica init --from LOCATION --user U`.
struct ReplicaInitCommand: Sendable, Hashable {
    /// The source: a SQLite file path, a `postgresql://` URL, or a `feedsync serve`'s `http(s)://` URL, as given.
    let source: String
    /// The bearer token for an `http(s)://` source (`--token`, else `FEEDSYNC_TOKEN`).
    let token: String?
}

/// `sync [--follow]`.
struct SyncCommand: Sendable, Hashable {
    /// Keep syncing as either side changes, until interrupted.
    let follow: Bool
}
