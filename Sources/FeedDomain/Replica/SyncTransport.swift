/// How a replica reaches its source's ``SyncEndpoint``: in process (`InProcessSyncTransport`, to a database
/// location) or over HTTP. A transport authenticates as the replica's user in its own way; the messages never carry
/// the user.
///
/// Throw ``SyncError/unavailable(_:)`` for failures that may pass (no connection, a timeout, a server restarting):
/// ``ReplicaSync`` retries those with backoff and keeps the queue. Any other error is permanent for this call and is
/// reported in the replica's status.
public protocol SyncTransport: Sendable {
    /// Sends a push and returns the source's answer.
    func push(_ request: PushRequest) async throws(SyncError) -> PushResponse
    /// Sends a pull and returns the source's answer.
    func pull(_ request: PullRequest) async throws(SyncError) -> PullResponse
    /// Returns once the source may have changes after `seq`, or after `timeout` (a transport that cannot tell returns
    /// after `timeout`); `ReplicaSync.follow` pulls when it returns.
    func waitForChanges(after seq: Int64, timeout: Duration) async throws(SyncError)
}
