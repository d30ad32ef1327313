/// Why a sync call failed: what a server returns to a replica, and what a replica's sync reports.
public enum SyncError: Error, Sendable, Hashable {
    /// The message's protocol version is not this build's (``SyncProtocol/version``).
    case unsupportedVersion(Int)
    /// The message breaks the protocol (mutation numbers not increasing, too many mutations, a bad client id); the
    /// reason names what.
    case invalidRequest(String)
    /// The client id was first used by another user; a client id belongs to one user for good.
    case clientOfAnotherUser(clientID: String)
    /// The source has no user with the id the request acts as.
    case unknownUser(String)
    /// The caller is not allowed to sync (a missing, wrong or revoked token).
    case unauthorized
    /// The source cannot be reached or is busy for now (connection refused or lost, a timeout, a lock held too long);
    /// retrying later may succeed. Nothing was lost: the replica keeps its queue.
    case unavailable(String)
    /// The local database is not a replica (``FeedService/replicaStatus()-9h5rz`` is `nil`).
    case notAReplica
    /// A database failed for another reason.
    case feed(FeedError)

    /// Whether retrying later may succeed.
    public var isTransient: Bool {
        switch self {
        case .unavailable: true
        case .feed(let error): error.category == .busy
        default: false
        }
    }

    /// Wraps a domain error: transient ones become ``unavailable(_:)``.
    static func wrap(_ error: FeedError) -> SyncError {
        error.category == .busy ? .unavailable(error.description) : .feed(error)
    }
}

extension SyncError: CustomStringConvertible {
    /// One line naming the problem.
    public var description: String {
        switch self {
        case .unsupportedVersion(let version):
            "sync protocol version \(version) is not supported (this build speaks \(SyncProtocol.version))"
        case .invalidRequest(let reason): "invalid sync request: \(reason)"
        case .clientOfAnotherUser(let clientID): "client \(FeedError.quoted(clientID)) belongs to another user"
        case .unknownUser(let id): "the source has no user \(FeedError.quoted(id))"
        case .unauthorized: "not authorized to sync: the token is missing, wrong or revoked"
        case .unavailable(let reason): "the source is unavailable: \(reason)"
        case .notAReplica: "this database is not a replica; make it one with 'feedsync replica init --from LOCATION --user U'"
        case .feed(let error): error.description
        }
    }
}
