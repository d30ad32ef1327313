/// How the domain reaches a feature's storage: the backend's transaction also conforms to the feature's protocol,
/// and these accessors hand the same transaction out as that protocol, so a feature's operations run in the
/// transaction of the command that needs them (a replica push applies likes and records the client in one).
///
/// A feature both backends have is required: a transaction without it is a backend's programming error, caught by
/// the conformance suite. A feature one backend has (replicas: SQLite) is optional.
extension FeedTransaction {
    /// API tokens' storage.
    package var tokens: any FeedTokenStore { required(as: (any FeedTokenStore).self) }
    /// The source's side of replica sync.
    package var syncSource: any FeedSyncSource { required(as: (any FeedSyncSource).self) }
    /// Whole-database maintenance: counts, checks, pruning.
    package var maintenance: any FeedMaintenance { required(as: (any FeedMaintenance).self) }
    /// Statements of yours (a transactional durable subscriber's effects): the one place user SQL runs.
    package var userStatements: any FeedUserStatements { required(as: (any FeedUserStatements).self) }
    /// Deleting posts and erasing users.
    package var deletion: any FeedDeletion { required(as: (any FeedDeletion).self) }
    /// The replica tables, or `nil` on a backend that has no replicas.
    package var replicaStore: (any ReplicaStore)? { self as? any ReplicaStore }

    private func required<Feature>(as feature: Feature.Type) -> Feature {
        guard let conforming = self as? Feature else {
            preconditionFailure("API Violation: \(type(of: self)) does not implement \(feature)")
        }
        return conforming
    }
}
