internal import FeedCore

extension FeedService {
    /// Runs the service until the calling task is cancelled, then closes it (``close()``): the shape of a server's
    /// main loop, next to its HTTP server in a task group.
    ///
    /// While it runs, the service keeps its watch of other processes' and machines' commits going — the one its
    /// change streams share (a ``ChangeFeed`` of its own) — so their events reach ``bridge``'s subscribers, and so
    /// every projection and durable subscriber, with no stream iterating. Cancelling the task ends it promptly: the
    /// watch stops after its current step, the backend closes, and the call returns. Calling ``close()`` from
    /// elsewhere ends it too.
    ///
    /// ```swift
    /// let service = try FeedService(location: url)
    /// try await withThrowingDiscardingTaskGroup { group in
    ///     group.addTask { try await service.run() }            // other processes' commits → bridge
    ///     group.addTask { try await httpServer.run() }
    /// }                                                          // cancelling the group closes the service
    /// ```
    ///
    /// - Throws: ``FeedError`` when the watch cannot start (the database cannot be watched; an in-memory database
    ///   has nothing to watch and runs without one), ``FeedError/serviceClosed`` on a closed service, and
    ///   ``FeedError/databaseReplaced(path:)`` when the followed SQLite file was deleted or replaced (the service is
    ///   closed then too). Cancellation is the normal end: it returns without an error.
    public func run() async throws(FeedError) {
        try checkOpen()
        if let failure = sharedWatch.retain(service: self) {
            sharedWatch.release()
            throw failure
        }
        let ending = await lifecycle.waitForEnd()
        // Closing waits for the watch's current step and the backend's connections: not on a cooperative thread. The
        // watch stops with the service, before this run lets go of it.
        let service = self
        _ = try? await blockingPool.run(honouringCancellation: false) { () throws(FeedError) in service.close() }
        sharedWatch.release()
        if let ending { throw ending }
    }

    /// Closes the service: stops its watch of other processes, ends ``run()``, and closes the backend's connections.
    /// Later commands and queries fail with ``FeedError/serviceClosed``. Calling it again does nothing.
    ///
    /// It never waits for delivery, so a bridge sink or any other callback may call it: events already handed to
    /// the bridge still reach its subscribers, afterwards; those still waiting to be read back
    /// from the log (a subscriber fell behind, see ``EventBridge``) are not delivered. Call
    /// ``waitForDelivery(through:timeout:)-43d7m`` first to see your last commit delivered. It waits for the watch's
    /// thread to end its current step (at most 5 seconds; at once when called on that thread) and for a command
    /// still writing to finish. Change feeds and durable subscribers on the service stop retrying. A service released
    /// without closing closes its connections as they are released.
    ///
    /// ```swift
    /// defer { service.close() }
    /// ```
    public func close() {
        guard lifecycle.close() else { return }
        sharedWatch.close()
        bridge.fanout.detachLog(owner: ObjectIdentifier(self))
        backend.close()
        log(.serviceClosed, .info, "the service is closed")
    }

    /// Whether ``close()`` was called (directly or by the end of ``run()``).
    public var isClosed: Bool { lifecycle.isClosed }

    /// Lets the bridge's delivery read from this service's log the events it does not keep in memory (a slow
    /// subscriber held it up); until ``close()``.
    func attachDeliveryLog() {
        bridge.fanout.attachLog(
            EventSequencer.LogSource(
                owner: ObjectIdentifier(self),
                read: { [weak self] after, limit in
                    guard let service = self, !service.isClosed else { return nil }
                    do {
                        return try service.backend.readOnce { tx in try tx.events(after: after, limit: limit) }
                    } catch {
                        if service.isClosed { return nil }
                        throw error
                    }
                },
                log: { [weak self] kind, level, message, fields in self?.log(kind, level, message, fields) }))
    }

    /// Throws ``FeedError/serviceClosed`` once the service is closed: the first step of every command and query.
    func checkOpen() throws(FeedError) {
        if lifecycle.isClosed { throw FeedError.serviceClosed }
    }
}
