/// `token issue --user U [--label TEXT]`: the user comes from the global `--user` (or `FEEDSYNC_USER`).
struct TokenIssueCommand: Sendable, Hashable {
    /// A note shown by `token list`, empty when not given.
    let label: String
}

/// `token revoke ID`.
struct TokenRevokeCommand: Sendable, Hashable {
    /// The token's public id, as `token list` shows it.
    let id: String
}
