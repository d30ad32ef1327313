// The FeedSync library product: `import FeedSync` gives a client the whole public API — the service, its models,
// publishers, projections and sync. The backends and the seam between them and the domain (`FeedBackend`,
// `FeedTransaction`) are `package`: a client opens a database by location (`FeedService(location:options:)`).
@_exported public import FeedCore
@_exported public import FeedPublishers
@_exported public import FeedDependencies
@_exported public import FeedDomain
