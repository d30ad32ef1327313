// The FeedSync library product: `import FeedSync` gives a client the whole public API — the domain, its models
// and the backend contract. The backends' own types (SQLite's `FeedStore`, `Connection`; PostgreSQL's
// `PostgresBackend`) stay in their modules: import `FeedStorage` or `FeedPostgres` to use them directly.
@_exported public import FeedCore
@_exported public import FeedPublishers
@_exported public import FeedDependencies
@_exported public import FeedDomain
