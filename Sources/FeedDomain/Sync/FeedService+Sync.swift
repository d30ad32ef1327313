internal import FeedStorage
internal import FeedSQLite
public import Foundation

extension FeedService {
    /// Publishes, through ``bridge``, every event committed since the last published one — by any process — in seq
    /// order, each once.
    ///
    /// ``ChangeFeed`` calls this whenever the database changes; call it yourself to sync on demand (for example
    /// when an app comes to the foreground). Events this process committed through the service are already
    /// published and are not repeated.
    ///
    /// - Returns: how many events were published.
    /// - Throws: ``FeedError`` (`busy` when another connection blocks reading; retry later).
    @discardableResult
    public func publishCommittedEvents(batchSize: Int = 10_000) throws(FeedError) -> Int {
        let sequencer = bridge.sequencer
        var total = 0
        while true {
            var ticket: EventSequencer.Ticket?
            var events: [EventRecord] = []
            do {
                // Under the writer's lock, so local commits cannot interleave: the queue stays in seq order.
                try store.database.writeWithoutTransaction { db in
                    guard let queued = sequencer.lastQueuedSeq else { return }
                    events = try EventLog(db).events(after: queued, limit: batchSize)
                    guard let last = events.last?.seq else { return }
                    ticket = sequencer.reserve()
                    sequencer.markQueued(through: last)
                }
            } catch {
                if let ticket { sequencer.cancel(ticket) }
                throw FeedError.wrap(error)
            }
            guard let ticket else { return total }
            sequencer.complete(ticket, with: events)
            total += events.count
            if events.count < batchSize { return total }
        }
    }

    /// Deletes events with `seq <= seq` from the log. Subscribers whose cursor is older are told to rebuild.
    ///
    /// - Returns: the number of events deleted.
    @discardableResult
    public func pruneEvents(through seq: Int64) throws(FeedError) -> Int {
        do {
            return try store.write { db in try EventLog(db).prune(through: seq) }
        } catch {
            throw FeedError.wrap(error)
        }
    }

    /// Deletes events committed before `date` from the log.
    @discardableResult
    public func pruneEvents(olderThan date: Date) throws(FeedError) -> Int {
        do {
            return try store.write { db in
                guard let seq = try EventLog(db).lastSeq(before: date) else { return 0 }
                return try EventLog(db).prune(through: seq)
            }
        } catch {
            throw FeedError.wrap(error)
        }
    }
}
