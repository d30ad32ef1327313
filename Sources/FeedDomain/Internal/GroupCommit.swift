internal import FeedSQLite
internal import FeedStorage
internal import Foundation

/// Group commit for like commands: callers that overlap share one write transaction.
///
/// Each caller adds a **unit** (its commands, which must commit or fail together) and runs the backlog on a
/// ``SerialDrain`` at ``DrainLevel/writer``. The first caller to find nobody writing becomes the leader: it takes
/// every waiting unit (up to ``maximumBatch``), runs them in one `IMMEDIATE` transaction — each unit inside its own
/// `SAVEPOINT` when there are several, so a unit that fails (an unknown post, a constraint) is rolled back alone
/// and fails only its caller — commits, hands the committed range of events to the sequencer while it still holds
/// the writer connection, and repeats while units are waiting. The others wait for the commit that holds their
/// unit, then deliver their events as any command does. A caller never returns before the `COMMIT` that holds its
/// command, and a failed `COMMIT` fails every unit of its batch.
///
/// The leader runs no callback and waits only for the writer connection and SQLite's file lock, so any thread —
/// even one delivering events or running a projection — may wait for it (``DrainLevel/writer`` is the lowest
/// level). One caller alone pays one transaction, as without grouping, plus one uncontended lock round trip.
final class GroupCommit: Sendable {
    /// The most units one transaction takes: bounds the leader's latency and its memory.
    static let maximumBatch = 256

    /// One caller's commands and, once processed, their outcome.
    ///
    /// `@unchecked Sendable`: `outcome` and `lastSeq` are written by the leader before it finishes the batch under
    /// the drain's lock, and read by the caller only after ``SerialDrain/run(until:)`` saw the unit done under
    /// the same lock.
    final class Unit: @unchecked Sendable {
        let id: UInt64
        let commands: [LikeCommand]
        let now: Date
        var outcome: Result<[LikeResult], FeedError>?
        var lastSeq: Int64?

        init(id: UInt64, commands: [LikeCommand], now: Date) {
            self.id = id
            self.commands = commands
            self.now = now
        }
    }

    /// Applies one unit's commands inside the current transaction, appending their events.
    typealias Apply = @Sendable (Connection, [LikeCommand], Date, inout [EventRecord]) throws -> [LikeResult]

    private let drain: SerialDrain<Backlog>

    init(store: FeedStore, sequencer: EventSequencer, apply: @escaping Apply) {
        drain = SerialDrain(level: .writer, backlog: Backlog()) { batch in
            Self.process(batch, store: store, sequencer: sequencer, apply: apply)
        }
    }

    /// How many transactions ran and how many units they held, since the service was created.
    var statistics: (transactions: Int, units: Int) {
        drain.withBacklog { ($0.transactions, $0.units) }
    }

    /// How many units wait for a leader to take them, and how many leaders took so far.
    var queue: (waiting: Int, taken: Int) {
        drain.withBacklog { ($0.waiting, $0.taken) }
    }

    /// Runs `commands` as one unit, grouped with whatever other callers' units are waiting.
    ///
    /// - Returns: the unit, with its outcome and the seq of its last event (for delivery).
    func run(_ commands: [LikeCommand], now: Date) -> Unit {
        let unit = drain.withBacklog { $0.add(commands, now: now) }
        let done = drain.run(until: unit.id)
        // The writer level is the lowest, so every thread may wait for it: the unit is always done here.
        precondition(done && unit.outcome != nil, "GroupCommit: a unit returned unprocessed")
        return unit
    }

    private static func process(_ batch: [Unit], store: FeedStore, sequencer: EventSequencer, apply: Apply) {
        var events: [EventRecord] = []
        do {
            try store.database.writeWithoutTransaction { db in
                var after: Int64 = 0
                try db.transaction(.immediate) { db in
                    if batch.count == 1 {
                        // Alone: the transaction itself isolates the unit; no savepoint to pay for.
                        let unit = batch[0]
                        unit.outcome = .success(try apply(db, unit.commands, unit.now, &events))
                        unit.lastSeq = events.last?.seq
                    } else {
                        for unit in batch {
                            let mark = events.count
                            do {
                                let results = try db.savepoint { db in try apply(db, unit.commands, unit.now, &events) }
                                unit.outcome = .success(results)
                                unit.lastSeq = events.count > mark ? events.last?.seq : nil
                            } catch {
                                events.removeSubrange(mark...)
                                unit.outcome = .failure(feedError(error, path: store.path))
                            }
                        }
                    }
                    guard let first = events.first?.seq else { return }
                    after = first - 1
                    if let known = sequencer.highestKnownSeq, known < after {
                        // Other processes committed since the highest seq known here: their events go out first.
                        let missing = try EventLog(db).events(after: known, limit: Int(after - known))
                        events.insert(contentsOf: missing, at: 0)
                        after = known
                    }
                }
                if let last = events.last?.seq {
                    sequencer.submit(after: after, through: last, events: events)
                }
            }
        } catch {
            // The transaction (or its COMMIT) failed: nothing of the batch committed.
            let failure = feedError(error, path: store.path)
            for unit in batch {
                if case .failure = unit.outcome {} else { unit.outcome = .failure(failure) }
                unit.lastSeq = nil
            }
        }
    }

    struct Backlog: DrainBacklog {
        private var pending: [Unit] = []
        private var nextID: UInt64 = 0
        private var finished: UInt64 = 0
        private(set) var transactions = 0
        private(set) var units = 0
        private(set) var taken = 0

        var waiting: Int { pending.count }

        mutating func add(_ commands: [LikeCommand], now: Date) -> Unit {
            nextID += 1
            let unit = Unit(id: nextID, commands: commands, now: now)
            pending.append(unit)
            return unit
        }

        mutating func next() -> [Unit]? {
            guard !pending.isEmpty else { return nil }
            let batch: [Unit]
            if pending.count <= GroupCommit.maximumBatch {
                batch = pending
                pending.removeAll(keepingCapacity: true)
            } else {
                batch = Array(pending.prefix(GroupCommit.maximumBatch))
                pending.removeFirst(GroupCommit.maximumBatch)
            }
            taken += batch.count
            return batch
        }

        mutating func finish(_ work: [Unit]) {
            if let last = work.last?.id { finished = last }
            transactions += 1
            units += work.count
        }

        func isDone(_ ticket: UInt64) -> Bool {
            finished >= ticket
        }
    }
}

/// A domain error for anything thrown below the domain, naming the database file for SQLite's errors.
func feedError(_ error: any Error, path: String?, value: String? = nil) -> FeedError {
    if let error = error as? SQLiteError { return FeedError(StorageError(error, path: path), value: value) }
    return FeedError.wrap(error, value: value)
}
