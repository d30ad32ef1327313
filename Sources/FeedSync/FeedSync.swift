// The FeedSync library product: `import FeedSync` gives a client the whole public API.
@_exported public import FeedSQLite
@_exported public import FeedStorage
@_exported public import FeedPublishers
@_exported public import FeedDependencies
@_exported public import FeedDomain
