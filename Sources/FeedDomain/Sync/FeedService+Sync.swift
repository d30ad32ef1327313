internal import FeedCore
public import Foundation

extension FeedService {
    /// Publishes, through ``bridge``, every event committed since the last published one — by any process — in seq
    /// order, each once: hands them to the delivery executor and returns (``waitForDelivery(through:timeout:)-43d7m``).
    ///
    /// ``ChangeFeed`` calls this whenever the database changes; call it yourself to sync on demand (for example
    /// when an app comes to the foreground). Events this process committed through the service are already
    /// published and are not repeated.
    ///
    /// - Returns: how many events were published.
    /// - Throws: ``FeedError`` (`busy` when another connection blocks reading; retry later).
    @discardableResult
    public func publishCommittedEvents(batchSize: Int = 10_000) throws(FeedError) -> Int {
        try publishCommittedEvents(batchSize: batchSize) { _ in }
    }

    /// ``publishCommittedEvents(batchSize:)``, calling `beforeBatch` with the batch's index (from 0) before each read
    /// of the log: where ``ChangeFeed``'s tests inject a failure between two batches.
    func publishCommittedEvents(batchSize: Int, beforeBatch: (Int) throws -> Void) throws(FeedError) -> Int {
        try checkOpen()
        let sequencer = bridge.sequencer
        var total = 0
        var batch = 0
        while true {
            // Read before the log: a rewrite another caller found meanwhile is not declared a second time.
            let epoch = sequencer.epoch
            guard let known = sequencer.highestKnownSeq else { return total }
            let page: [EventRecord]
            let head: Int64?
            do {
                try beforeBatch(batch)
                batch += 1
                // On a reader connection, not the writer: a local writer waiting for another process's lock must
                // not hold up what other processes already committed. One query is one snapshot, so the events
                // after `known` form a complete range. The read starts at `known` itself, to check that the log
                // still holds the event delivered there; the log's head is read when it does not.
                (page, head) = try backend.readOnce { tx in
                    let page = try tx.events(after: max(0, known - 1), limit: batchSize + 1)
                    return (page, known > 0 && page.first?.seq != known ? try tx.lastSeq() : nil)
                }
            } catch {
                throw FeedError.wrap(error)
            }
            if let rewrite = try rewriteFound(known: known, epoch: epoch, first: page.first, head: head) { throw rewrite.error }
            let events = Array(page.drop { $0.seq <= known })
            guard let last = events.last?.seq else { return total }
            total += sequencer.submit(after: known, through: last, events: events)
            if events.count < batchSize { return total }
        }
    }

    /// Whether the log no longer continues the history delivered through `known`: its head is below `known`, or its
    /// event at `known` (`first`, when the read found it) is not the one delivered there. When it was rewritten,
    /// delivery starts again after the new log's head, and the rewrite is returned. An event at `known` this process
    /// never saw (it started there) or that was pruned cannot be checked, and counts as the same.
    private func rewriteFound(known: Int64, epoch: UInt64, first: EventRecord?, head: Int64?) throws(FeedError) -> HistoryRewrite? {
        guard known > 0 else { return nil }
        let sequencer = bridge.sequencer
        if let first, first.seq == known {
            guard sequencer.match(first) == .different else { return nil }
            let head: Int64
            do {
                head = try backend.readOnce { tx in try tx.lastSeq() }
            } catch {
                throw FeedError.wrap(error)
            }
            return sequencer.rebase(to: head, ifKnown: known, epoch: epoch)
        }
        guard let head, head < known else { return nil }
        return sequencer.rebase(to: head, ifKnown: known, epoch: epoch)
    }

    /// Waits until every subscriber of ``bridge`` has been handed every event up to `seq` (see
    /// ``EventBridge/waitForDelivery(through:timeout:)``): after a command, for a view that must show what it did.
    ///
    /// ```swift
    /// let result = try service.like(userID: "alice", postID: "post2")
    /// if let seq = result.seq { service.waitForDelivery(through: seq) }   // every projection shows it now
    /// ```
    ///
    /// - Returns: whether they had within `timeout`.
    @discardableResult
    public func waitForDelivery(through seq: Int64, timeout: Duration = .seconds(10)) -> Bool {
        bridge.waitForDelivery(through: seq, timeout: timeout)
    }

    /// Deletes events with `seq <= seq` from the log. Subscribers whose cursor is older are told to rebuild.
    ///
    /// - Returns: the number of events deleted.
    @discardableResult
    public func pruneEvents(through seq: Int64) throws(FeedError) -> Int {
        try checkOpen()
        do {
            return try backend.write({ tx in try tx.maintenance.pruneEvents(through: seq) }, afterCommit: { _ in })
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Deletes events committed before `date` from the log.
    @discardableResult
    public func pruneEvents(olderThan date: Date) throws(FeedError) -> Int {
        try checkOpen()
        do {
            return try backend.write(
                { tx in
                    guard let seq = try tx.maintenance.lastSeq(before: date) else { return 0 }
                    return try tx.maintenance.pruneEvents(through: seq)
                }, afterCommit: { _ in })
        } catch {
            throw FeedError.wrap(error)
        }
    }
}
