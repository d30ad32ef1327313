internal import FeedCore
public import FeedDomain
internal import Foundation
internal import Synchronization

/// A replica's transport to a source database this process opens itself: a SQLite file or a PostgreSQL URL. The
/// replica acts as `userID`: whoever can open the database may act as anyone, so no token is involved.
///
/// The source is opened on first use and again after a failed open, so a replica following a source that is down
/// (a PostgreSQL server restarting, a file on an unmounted volume) keeps trying instead of failing for good. A SQLite
/// source must exist: a missing file is ``SyncError/unavailable(_:)``, never a new empty database.
public final class InProcessSyncTransport: SyncTransport {
    /// The source's location.
    public let location: String
    /// The user the replica acts as.
    public let userID: String
    private let options: FeedOpenOptions
    /// The open source, once opened.
    private let source = Mutex<SyncEndpoint?>(nil)

    /// A transport to the database at `location`, acting as `userID`; nothing is opened yet.
    public init(location: String, userID: String, options: FeedOpenOptions = FeedOpenOptions()) {
        self.location = location
        self.userID = userID
        self.options = options
    }

    /// Closes the source, if it was opened. A transport that is released without it releases the source's service,
    /// which closes without waiting.
    public func close() {
        source.withLock { endpoint in
            endpoint?.service.close()
            endpoint = nil
        }
    }

    public func push(_ request: PushRequest) async throws(SyncError) -> PushResponse {
        try await endpoint().push(request, userID: userID)
    }

    public func pull(_ request: PullRequest) async throws(SyncError) -> PullResponse {
        try await endpoint().pull(request, userID: userID)
    }

    public func waitForChanges(after seq: Int64, timeout: Duration) async throws(SyncError) {
        try await endpoint().waitForChanges(after: seq, timeout: timeout)
    }

    /// The source's endpoint, opening it when needed.
    private func endpoint() throws(SyncError) -> SyncEndpoint {
        if let endpoint = source.withLock({ $0 }) { return endpoint }
        let parsed: FeedLocation
        do {
            parsed = try FeedLocation(location)
        } catch {
            throw .feed(.storage(error))
        }
        if case .sqliteFile(let path) = parsed, !FileManager.default.fileExists(atPath: path) {
            throw .unavailable("no database at \(FeedError.quoted(path))")
        }
        let service: FeedService
        do {
            service = try FeedService(location: parsed, options: options)
        } catch {
            switch error {
            case .storage(.cannotOpen), .storage(.connectionLost), .storage(.busy), .storage(.timedOut):
                throw .unavailable(error.description)
            default:
                throw .feed(error)
            }
        }
        return source.withLock { current in
            if let current {
                service.close()
                return current
            }
            let endpoint = SyncEndpoint(service: service)
            current = endpoint
            return endpoint
        }
    }
}
