/// Why a sync call failed: what a server returns to a replica, and what a replica's sync reports.
public enum SyncError: Error, Sendable, Hashable {
    /// The message's protocol version is not this build's (``SyncProtocol/version``).
    case unsupportedVersion(Int)
    /// The message breaks the protocol (mutation numbers not increasing, too many mutations, a bad client id); the
    /// reason names what.
    case invalidRequest(String)
    /// The client id was first used by another user; a client id belongs to one user for good.
    case clientOfAnotherUser(clientID: String)
    /// The source has no account with the id the request acts as: it was erased, or never existed (an erased id
    /// leaves no trace, so the two are one answer). The replica cannot sync any more; its local data is left as it
    /// was. ``ReplicaSync`` fills in the replica's user and its database's location (`replica`), which the source
    /// does not know.
    case accountNotFound(userID: String, replica: String?)
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
        case .accountNotFound(let id, let replica):
            "the source has no account \(FeedError.quoted(id)): it was erased, or never existed, and this replica cannot "
                + "sync any more"
                + (replica.map { "; its local data is left as it was: remove \(FeedError.quoted($0)) to delete it" } ?? "")
        case .unauthorized: "not authorized to sync: the token is missing, wrong or revoked, or its account was erased"
        case .unavailable(let reason): "the source is unavailable: \(reason)"
        case .notAReplica: "this database is not a replica; make it one with 'feedsync replica init --from LOCATION --user U'"
        case .feed(let error): error.description
        }
    }
}
