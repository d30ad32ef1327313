internal import FeedCore
internal import Foundation

/// Syncs a replica with its source: pushes the queue, then pulls until caught up ( ``sync()`` ), or keeps doing so
/// as either side changes ( ``follow(onSync:)`` ).
///
/// ```swift
/// let replica = try FeedService(location: "phone.sqlite")         // made a replica by `feedsync replica init`
/// let sync = try ReplicaSync(replica: replica, transport: InProcessSyncTransport(location: source, userID: "user1"))
/// let report = try await sync.sync()                              // report.pendingChanges == 0 when all confirmed
/// ```
///
/// A request that fails with a transient error (``SyncError/isTransient``) is retried with exponential backoff
/// (``RetryPolicy``); every other failure ends the call, is recorded in ``FeedService/replicaStatus()-9h5rz`` and thrown
/// — but ``SyncError/accountNotFound(userID:replica:)``, which leaves the replica's file exactly as it was.
/// Nothing is lost either way: each step commits locally in one transaction, and the source applies each mutation
/// once however often it is sent. Two syncs of one replica at a time (two processes) are safe: a pull step applies
/// only over the cursor it was asked from.
public final class ReplicaSync: Sendable {
    /// The replica database.
    public let replica: FeedService
    /// How it reaches the source.
    public let transport: any SyncTransport
    /// How transient failures are retried.
    public let retry: RetryPolicy
    /// Mutations per push.
    public let batchSize: Int
    /// Changes, or snapshot rows, per pull step.
    public let pullSize: Int

    /// How a request that failed transiently is retried.
    public struct RetryPolicy: Sendable, Hashable {
        /// Tries of one request before ``ReplicaSync/sync()`` gives up with ``SyncError/unavailable(_:)``.
        public var attempts: Int
        /// The wait after the first failure; each further failure doubles it, up to ``maximumDelay``.
        public var initialDelay: Duration
        /// The longest wait between tries.
        public var maximumDelay: Duration

        /// A policy from its parts.
        public init(attempts: Int, initialDelay: Duration, maximumDelay: Duration) {
            self.attempts = max(1, attempts)
            self.initialDelay = initialDelay
            self.maximumDelay = maximumDelay
        }

        /// Four tries, waiting 0.2 s, 0.4 s, 0.8 s between them.
        public static let standard = RetryPolicy(attempts: 4, initialDelay: .milliseconds(200), maximumDelay: .seconds(5))
    }

    /// What one sync did; `feedsync sync --json` prints it.
    public struct Report: Sendable, Hashable, Codable {
        /// Mutations the source acknowledged in this sync (applied, or already applied before).
        public var pushed: Int
        /// Changes pulled (a snapshot counts its posts).
        public var pulled: Int
        /// Mutations the source refused in this sync.
        public var rejected: Int
        /// Local writes still waiting for confirmation.
        public var pendingChanges: Int
        /// The source seq the replica reflects now.
        public var lastSyncedSeq: Int64
        /// Whether the source sent a snapshot because the replica's cursor predated its history.
        public var resynced: Bool
    }

    /// A sync of `replica` through `transport`.
    ///
    /// - Throws: ``SyncError/notAReplica`` when the database is not a replica.
    public init(
        replica: FeedService, transport: any SyncTransport, retry: RetryPolicy = .standard, batchSize: Int = 1_000,
        pullSize: Int = SyncProtocol.maximumPullSize
    ) throws(SyncError) {
        guard replica.replicaIdentity.withLock({ $0 }) != nil else { throw .notAReplica }
        self.replica = replica
        self.transport = transport
        self.retry = retry
        self.batchSize = min(max(1, batchSize), SyncProtocol.maximumPushSize)
        self.pullSize = min(max(1, pullSize), SyncProtocol.maximumPullSize)
    }

    /// Pushes every pending mutation, then pulls until the replica reflects the source's head.
    public func sync() async throws(SyncError) -> Report {
        do {
            let report = try await syncOnce()
            await bestEffort { self.replica.recordSyncError(nil) }
            return report
        } catch {
            let error = named(error)
            // A replica whose account is gone is left exactly as it was, for its user to remove.
            if case .accountNotFound = error { throw error }
            let message = error.description
            await bestEffort { self.replica.recordSyncError(message) }
            throw error
        }
    }

    /// The error with what only the replica knows: an account the source does not have names the replica's user and
    /// the database to remove.
    private func named(_ error: SyncError) -> SyncError {
        guard case .accountNotFound = error, let link = replica.replicaLink else { return error }
        return .accountNotFound(userID: link.userID, replica: replica.backend.traits.location)
    }

    /// Syncs now and again whenever the source or the replica changes, until the calling task is cancelled (then it
    /// returns). Transient failures are retried for as long as it runs, with backoff up to the policy's maximum
    /// delay; `onSync` gets each completed sync's report.
    ///
    /// - Throws: the first permanent ``SyncError``.
    public func follow(onSync: @Sendable (Report) -> Void = { _ in }) async throws(SyncError) {
        var delay = retry.initialDelay
        while !Task.isCancelled {
            let report: Report
            do {
                report = try await sync()
                delay = retry.initialDelay
            } catch  where error.isTransient {
                noteRetry(error, after: delay)
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, retry.maximumDelay)
                continue
            }
            onSync(report)
            // The local seq first, then the queue: a write committed before the seq was read is in the queue now,
            // one committed after it wakes the local stream below.
            let localSeq = (try? await onReplica { () throws(FeedError) in try self.replica.lastLocalSeq() }) ?? 0
            let unpushed = try? await onReplica { () throws(FeedError) in try self.replica.replicaOutbox(limit: 1).mutations }
            if let unpushed, !unpushed.isEmpty { continue }
            let source = transport
            let local = replica.changes(after: localSeq)
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await source.waitForChanges(after: report.lastSyncedSeq, timeout: .seconds(30)) }
                group.addTask {
                    var iterator = local.makeAsyncIterator()
                    _ = try? await iterator.next()
                }
                await group.next()
                group.cancelAll()
            }
        }
    }

    private func syncOnce() async throws(SyncError) -> Report {
        var report = Report(pushed: 0, pulled: 0, rejected: 0, pendingChanges: 0, lastSyncedSeq: 0, resynced: false)
        while true {
            let outbox = try await onReplica { () throws(FeedError) in try self.replica.replicaOutbox(limit: self.batchSize) }
            guard let last = outbox.mutations.last else { break }
            let request = PushRequest(clientID: outbox.identity.clientID, mutations: outbox.mutations)
            let response = try await retrying { () async throws(SyncError) in try await transport.push(request) }
            guard response.lastMutation >= last.number else {
                throw .invalidRequest("the source acknowledged mutation \(response.lastMutation), not \(last.number)")
            }
            try await onReplica { () throws(FeedError) in try self.replica.applyPushResponse(response, identity: outbox.identity) }
            report.pushed += outbox.mutations.count
            report.rejected += response.rejected.count
        }
        var snapshot: SyncSnapshotPosition?
        var boundary: SnapshotBoundary?
        while true {
            let outbox = try await onReplica { () throws(FeedError) in try self.replica.replicaOutbox(limit: 0) }
            let request = PullRequest(
                clientID: outbox.identity.clientID, after: outbox.cursor.syncedSeq, afterCheck: outbox.cursor.syncedCheck,
                bulkGeneration: outbox.cursor.bulkGeneration, limit: pullSize, snapshot: snapshot)
            let response = try await retrying { () async throws(SyncError) in try await transport.pull(request) }
            try Self.checkVersion(response.version)
            let step = try await onReplica { [boundary] () throws(FeedError) in
                try self.replica.applyPullStep(
                    response, after: request.after, requested: request.snapshot, boundary: boundary, identity: outbox.identity)
            }
            let applied = step.applied
            // The snapshot's next page, or (when another sync moved the cursor meanwhile) a fresh start.
            snapshot = applied ? response.nextSnapshot : nil
            boundary = snapshot == nil ? nil : step.boundary
            if applied {
                report.pulled += response.changes.count + (response.snapshot?.posts.count ?? 0)
                report.resynced = report.resynced || response.resync
                report.lastSyncedSeq = response.through
            }
            if applied && !response.hasMore { break }
        }
        if let status = try await onReplica({ () throws(FeedError) in try self.replica.replicaStatus() }) {
            report.pendingChanges = status.pendingChanges
            report.lastSyncedSeq = status.lastSyncedSeq
        }
        return report
    }

    private static func checkVersion(_ version: Int) throws(SyncError) {
        guard version == SyncProtocol.version else { throw .unsupportedVersion(version) }
    }

    /// Runs `request` until it succeeds, fails permanently, or used up the policy's attempts.
    private func retrying<T>(_ request: () async throws(SyncError) -> T) async throws(SyncError) -> T {
        var delay = retry.initialDelay
        var attempt = 1
        while true {
            do {
                return try await request()
            } catch  where error.isTransient && attempt < retry.attempts && !Task.isCancelled {
                noteRetry(error, after: delay)
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, retry.maximumDelay)
                attempt += 1
            }
        }
    }

    /// Logs a transient failure that is tried again after `delay` (``FeedLogEvent/Kind/syncRetrying``).
    private func noteRetry(_ error: SyncError, after delay: Duration) {
        replica.log(
            .syncRetrying, .warning, "a sync request failed and is tried again in \(FeedService.milliseconds(delay)) ms: \(error)",
            ["delayMilliseconds": "\(FeedService.milliseconds(delay))"])
    }

    private func onReplica<T: Sendable>(_ body: @escaping @Sendable () throws(FeedError) -> T) async throws(SyncError) -> T {
        do {
            return try await replica.blockingPool.run(honouringCancellation: false, body)
        } catch {
            throw SyncError.wrap(error)
        }
    }

    private func bestEffort(_ body: @escaping @Sendable () -> Void) async {
        _ = try? await replica.blockingPool.run(honouringCancellation: false) { () throws(FeedError) in body() }
    }
}
