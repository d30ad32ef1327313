internal import FeedCore
internal import Foundation
internal import Synchronization

/// Group commit for like commands: callers that overlap share one write transaction.
///
/// Each caller adds a **unit** (its commands, which must commit or fail together). Up to
/// ``FeedBackendTraits/concurrentWriteTransactions`` callers at once — one on SQLite, two on PostgreSQL — find a free slot
/// and become **leaders**; a caller that finds every slot taken queues its unit and waits. A leader runs its own unit
/// and every queued one (up to ``maximumBatch``) in one write transaction through one
/// ``FeedTransaction/applyLikes(_:)`` call, commits, hands the committed range of events to the sequencer while it
/// still holds the writer, and wakes each caller of the batch on the caller's own semaphore (no broadcast: nobody
/// wakes only to wait again). An unknown user or post fails its unit alone (the backend reports it with nothing of
/// the unit written); any other failure of a unit makes the leader roll the batch back and run it again with each
/// unit in its own `SAVEPOINT`. If units queued up meanwhile, the leader hands its slot to the oldest one's caller
/// and returns; that caller leads the next batch. A caller never returns before the `COMMIT` that holds its
/// command, and a failed `COMMIT` fails every unit of its batch.
///
/// **Waiting: spin, then sleep.** A caller that queues its unit while the last batch took at most
/// ``spinWorthwhile`` (SQLite: a batch of a few toggles takes 30–150 µs) first polls its unit's `ready` flag for up
/// to ``spinWindow``, yielding the processor between polls, and sleeps on its semaphore only if the unit is still
/// not done. Waking a sleeping thread costs more than such a batch on a virtual machine (the idle processor must be
/// woken by an interrupt), and while the woken caller is on its way the next batch starts without it: with sleeping
/// waiters, W7 at 4 threads on 2 cores averages 1.1 units per transaction, with spinning ones 3.7. Where batches
/// take longer (PostgreSQL's end with a WAL flush: a millisecond or more), waiters sleep at once. A spinning waiter
/// holds no lock and only reads an atomic flag; it can delay nobody but the threads that share its processor, and
/// `sched_yield` hands the processor to them.
///
/// **Topping up.** Where the backend runs one write transaction at a time (SQLite), a leader that has applied
/// its batch takes the units that queued meanwhile into the same transaction, again and again, before it commits
/// (at most ``maximumBatch``; each caller has one unit in flight, so a batch holds at most one unit per calling
/// thread). When none is waiting and the batch holds fewer units than the last one did, the leader waits for more —
/// at most ``gatheringWindow`` per batch, yielding the processor — so that callers coming back with their next
/// command join this transaction instead of starting the next one. One caller alone never waits. The leader thus
/// works on its own unit while the others come back, and waits only for the last of them (W7 at 4 threads on
/// 2 cores: 2.2 units per transaction and 33k ops/s without the wait, 3.6 and 35.6k with it; waiting before
/// `BEGIN` instead: 3.6 and 31k). The spin and gathering windows together, A/B on SQLite
/// (`feedsync-bench w7 --threads 4,16`): `Docs/decisions/0002-group-commit.md`.
///
/// **Gathering before `BEGIN`.** Where several write transactions run at once (PostgreSQL), a second call in the
/// same transaction would take post locks after the log's, the one lock order the backend must keep, so there is no
/// topping up: when the last batch held several units and took at least ``gatheringWorthwhile`` (a
/// PostgreSQL batch ends with a WAL flush), a leader first waits — at most ``gatheringWindow``, yielding — for as
/// many units as the last batch held.
///
/// **Posts take turns.** Where two batches run at once, each holds its posts' rows through its commit, so a batch on
/// a post the other holds would only wait in the database: a unit on such a post waits in the queue instead, for a
/// leader that hands its slot on (decision 0014: hot post 797 → 5,855 ops/s). Other posts still use the second slot.
///
/// A leader runs no callback and waits only for the writer connection and the database's locks, so any thread — a
/// callback's included — may wait for it without closing a cycle (see `Docs/Architecture.md`).
final class GroupCommit: Sendable {
    /// The most units one transaction takes: bounds the leader's latency and its memory.
    static let maximumBatch = 256

    /// One caller's commands and, once processed, their outcome.
    ///
    /// `@unchecked Sendable`: `outcome` and `lastSeq` are written only by the leader that processes the unit, before
    /// it sets `ready` (releasing) and signals `wake`; the caller reads them only after `wake.wait()` returned or it
    /// saw `ready` set (acquiring) — either orders the two —, or on its own thread when it led the batch itself.
    final class Unit: @unchecked Sendable {
        let commands: [LikeCommand]
        let now: Date
        var outcome: Result<[LikeResult], FeedError>?
        var lastSeq: Int64?
        /// Signalled once the unit's batch committed (or failed), or to hand the caller leadership; created (under
        /// the queue's lock, before any leader can take the unit) only for a caller that waits.
        var wake: DispatchSemaphore?
        /// Set (releasing) once `outcome` is set or leadership is handed to this unit's caller, just before `wake` is
        /// signalled: a spinning caller reads it (acquiring) instead of sleeping on `wake`.
        let ready = Atomic<Bool>(false)

        init(commands: [LikeCommand], now: Date) {
            self.commands = commands
            self.now = now
        }

        /// The unit as a backend applies it.
        var likeUnit: LikeUnit { LikeUnit(operations: commands, at: now) }
    }

    /// A unit of a batch run without savepoints threw: the batch is rolled back and run again with a savepoint per
    /// unit, so that the unit fails alone.
    /// How long a leader waits, at most, for more callers' units: before it begins, or before it commits.
    static let gatheringWindow: Duration = .microseconds(50)

    /// The shortest last batch after which a leader gathers before it begins: four windows, so a wait costs at most a
    /// fifth of a batch. (Shorter batches — SQLite's — take in the units that queue while they run instead.)
    static let gatheringWorthwhile: Duration = gatheringWindow * 4

    /// How long a queued caller polls for its unit's outcome, at most, before it sleeps.
    static let spinWindow: Duration = .microseconds(100)

    /// The longest last batch after which queued callers spin: beyond it a caller's wait (the running batch, then at
    /// worst its own) would mostly outlast ``spinWindow``.
    static let spinWorthwhile: Duration = .microseconds(200)

    private struct Queue {
        var pending: [Unit] = []
        /// Callers leading a batch now, at most `slots`.
        var leaders = 0
        var lastBatch = 0
        /// How long the last batch's transaction took.
        var lastBatchDuration: Duration = .zero
        var transactions = 0
        var units = 0
        var taken = 0
        var isolatedReruns = 0
        /// Where several batches run at once: the posts of the batches running now, each held by one. A unit on
        /// one of them would only wait in the database for that batch's row lock, through its commit.
        var busyPosts: Set<String> = []

        /// Whether `unit` names a post that a running batch other than the one holding `held` holds.
        func conflicts(_ unit: Unit, besides held: Set<String> = []) -> Bool {
            unit.commands.contains { busyPosts.contains($0.postID) && !held.contains($0.postID) }
        }

        /// Marks `unit`'s posts as held by the batch holding `held` (by a new batch without it).
        mutating func hold(_ unit: Unit, into held: inout Set<String>) {
            for command in unit.commands where held.insert(command.postID).inserted { busyPosts.insert(command.postID) }
        }
        mutating func hold(_ unit: Unit) { for command in unit.commands { busyPosts.insert(command.postID) } }
    }

    private let queueState = Locked(Queue())
    private let backend: any FeedBackend
    private let sequencer: EventSequencer
    /// How many batches may run at once: the backend's ``FeedBackendTraits/concurrentWriteTransactions``.
    private let slots: Int
    /// Whether batches keep out of each other's posts (``Queue/busyPosts``): only when several run at once.
    private var separatesPosts: Bool { slots > 1 }

    init(backend: any FeedBackend, sequencer: EventSequencer) {
        self.backend = backend
        self.slots = max(1, backend.traits.concurrentWriteTransactions)
        self.sequencer = sequencer
    }

    /// How many transactions ran and how many units they held, since the service was created.
    var statistics: (transactions: Int, units: Int) {
        queueState.withLock { ($0.transactions, $0.units) }
    }

    /// How many batches were run again with a savepoint per unit because a unit failed after writing.
    var isolatedReruns: Int { queueState.withLock { $0.isolatedReruns } }

    /// How many units wait for a leader to take them, and how many leaders took so far.
    var queue: (waiting: Int, taken: Int) {
        queueState.withLock { ($0.pending.count, $0.taken) }
    }

    /// Runs `commands` as one unit, grouped with whatever other callers' units are waiting.
    ///
    /// - Returns: the unit, with its outcome and the seq of its last event (for delivery).
    func run(_ commands: [LikeCommand], now: Date) -> Unit {
        let unit = Unit(commands: commands, now: now)
        if backend.isWritingOnCurrentThread {
            // Called from inside a write on this thread (a transactional handler): waiting for a leader, or leading,
            // would wait for the writer this thread holds. Fail clearly instead of deadlocking.
            unit.outcome = .failure(Self.nestedWriteError(backend))
            return unit
        }
        let (leads, spins) = queueState.withLock { queue -> (Bool, Bool) in
            if queue.leaders < slots && !(separatesPosts && queue.conflicts(unit)) {
                // A free slot, and no running batch holds this unit's posts: units queue only otherwise, so none
                // waits ahead of this caller, which leads.
                queue.leaders += 1
                if separatesPosts { queue.hold(unit) }
                return (true, false)
            }
            unit.wake = DispatchSemaphore(value: 0)
            queue.pending.append(unit)
            return (false, queue.lastBatchDuration <= Self.spinWorthwhile)
        }
        if !leads, let wake = unit.wake {
            // Spin first when batches are short (see the type's notes); the semaphore is signalled either way.
            let spun = spins && Self.poll(until: .now + Self.spinWindow) { unit.ready.load(ordering: .acquiring) }
            if !spun { wake.wait() }
            // Woken with an outcome: a leader ran the unit. Without one: a leader handed this caller its slot.
            if unit.outcome != nil { return unit }
        }
        lead(with: unit)
        precondition(unit.outcome != nil, "GroupCommit: a unit returned unprocessed")
        return unit
    }

    /// Runs `own` and the units queued behind it in one batch, then hands the slot on (or gives it up).
    private func lead(with own: Unit) {
        gather()
        // The posts this batch holds, where batches keep out of each other's (``Queue/busyPosts``); else `nil`.
        var held: Set<String>? = separatesPosts ? [] : nil
        var (batch, expected) = queueState.withLock { queue -> ([Unit], Int) in
            queue.taken += 1
            if held != nil { queue.hold(own, into: &held!) }
            return ([own] + Self.take(from: &queue, upTo: GroupCommit.maximumBatch - 1, held: &held), queue.lastBatch)
        }
        let clock = ContinuousClock()
        let started = clock.now
        // Topping up (see the type's notes): the units queued meanwhile; when none is and the batch holds fewer
        // units than the last one, waiting for more — at most one gathering window per batch.
        var gatherUntil: ContinuousClock.Instant?
        let topUp: (Int) -> [Unit] = { [queueState] count in
            let take = {
                queueState.withLock { Self.take(from: &$0, upTo: GroupCommit.maximumBatch - count, held: &held) }
            }
            var units = take()
            guard units.isEmpty, count < expected else { return units }
            let deadline = gatherUntil ?? clock.now + Self.gatheringWindow
            gatherUntil = deadline
            _ = Self.poll(until: deadline) {
                units = take()
                return !units.isEmpty
            }
            return units
        }
        // The backend decides whether units join its transaction (``FeedBackend/commitLikes(_:join:afterCommit:)``):
        // only a single writer has no lock order to keep between the calls.
        if !Self.process(&batch, backend: backend, sequencer: sequencer, isolated: false, topUp: topUp) {
            // A unit's failure failed the backend's call: rolled back; again, each unit in its own savepoint.
            queueState.withLock { $0.isolatedReruns += 1 }
            _ = Self.process(&batch, backend: backend, sequencer: sequencer, isolated: true, topUp: nil)
        }
        let duration = clock.now - started
        let next = queueState.withLock { queue -> Unit? in
            queue.transactions += 1
            queue.units += batch.count
            queue.lastBatch = batch.count
            queue.lastBatchDuration = duration
            if let held { queue.busyPosts.subtract(held) }
            // The oldest waiting caller whose posts no running batch holds; one on a held post waits for the batch
            // holding it, whose leader hands its slot on in turn.
            guard let index = queue.pending.firstIndex(where: { !(separatesPosts && queue.conflicts($0)) }) else {
                queue.leaders -= 1
                return nil
            }
            let next = queue.pending.remove(at: index)
            if separatesPosts { queue.hold(next) }
            return next
        }
        for unit in batch where unit !== own { Self.wake(unit) }
        // Hand the slot to the oldest waiting caller: it leads the next batch while this caller returns.
        if let next { Self.wake(next) }
    }

    /// Takes up to `limit` queued units, oldest first (called with the queue's lock held); with `held` (the posts
    /// of the taking batch), only units on no other running batch's post, whose posts it then holds too.
    private static func take(from queue: inout Queue, upTo limit: Int, held: inout Set<String>?) -> [Unit] {
        guard limit > 0, !queue.pending.isEmpty else { return [] }
        guard held != nil else {
            let count = min(queue.pending.count, limit)
            let units = Array(queue.pending.prefix(count))
            queue.pending.removeFirst(count)
            queue.taken += count
            return units
        }
        var units: [Unit] = []
        var left: [Unit] = []
        for unit in queue.pending {
            if units.count < limit && !queue.conflicts(unit, besides: held!) {
                queue.hold(unit, into: &held!)
                units.append(unit)
            } else {
                left.append(unit)
            }
        }
        queue.pending = left
        queue.taken += units.count
        return units
    }

    /// Tells a queued unit's caller that its unit is done or that it leads now: the flag for a spinning caller, the
    /// semaphore for a sleeping one (signalled in both cases: the caller may have stopped spinning just now).
    private static func wake(_ unit: Unit) {
        unit.ready.store(true, ordering: .releasing)
        unit.wake?.signal()
    }

    /// Checks `condition` until it holds or `deadline` passes, yielding the processor between checks: the one
    /// polling loop of spinning callers, topping up and gathering.
    ///
    /// - Returns: whether `condition` held. (A spinning caller whose unit became ready does not wait on its
    ///   semaphore: the semaphore is released with the unit, its count above zero.)
    private static func poll(until deadline: ContinuousClock.Instant, _ condition: () -> Bool) -> Bool {
        while true {
            if condition() { return true }
            guard ContinuousClock.now < deadline else { return false }
            sched_yield()
        }
    }

    /// Waits, at most ``gatheringWindow``, for as many units as the last batch held, when that was more than one.
    ///
    /// The leader's own unit is not in the queue, so it waits for `lastBatch - 1` queued units. (Waiting for
    /// `lastBatch` of them, with the leader's own unit outside the queue, would make every batch wait out the whole
    /// window when all callers are already in the batch: W7 at 4 threads loses 13 % that way.)
    private func gather() {
        let wanted = queueState.withLock { queue in
            queue.lastBatch > 1 && queue.lastBatchDuration >= Self.gatheringWorthwhile && queue.pending.count < queue.lastBatch - 1
                ? queue.lastBatch - 1 : 0
        }
        guard wanted > 0 else { return }
        _ = Self.poll(until: .now + Self.gatheringWindow) { queueState.withLock { $0.pending.count >= wanted } }
    }

    /// The error for a command or a durable subscriber's `catchUp()` run from inside a write transaction on the same
    /// thread.
    static func nestedWriteError(_ backend: any FeedBackend) -> FeedError {
        .storage(
            .database(
                DatabaseFailure(
                    backend: backend.traits.name, code: "misuse",
                    message: "a command or catchUp() was run from inside a write transaction on the same thread (for "
                        + "example a transactional handler); write through the transaction you were given")))
    }

    /// Runs `batch` in one transaction: one ``FeedBackend/commitLikes(_:join:afterCommit:)`` call for the batch, the
    /// units queued meanwhile joining it where the backend asks (`topUp`). An unknown user or post fails its unit
    /// alone (a result of the call). When the call throws for a batch of several units, nothing of it committed and,
    /// `isolated`, it runs again in a transaction with a savepoint per unit, so that whatever failed fails only its
    /// unit.
    ///
    /// - Returns: `false` when the batch failed and must run again `isolated` (never when `isolated`).
    private static func process(
        _ batch: inout [Unit], backend: any FeedBackend, sequencer: EventSequencer, isolated: Bool,
        topUp: ((Int) -> [Unit])?
    ) -> Bool {
        // The batch with the units that joined it.
        var units = batch
        defer { batch = units }
        let epoch = sequencer.epoch
        do {
            if isolated {
                // The body may run more than once (a backend retries serialization failures): it keeps no state
                // from an earlier attempt — every unit's outcome and the events are set anew.
                _ = try backend.write(
                    { [batch] tx -> [EventRecord] in
                        var events: [EventRecord] = []
                        for unit in batch {
                            do {
                                let outcomes = try tx.savepoint { try tx.applyLikes([unit.likeUnit]) }
                                record(outcomes, of: [unit], into: &events)
                            } catch {
                                unit.outcome = .failure(FeedError.wrap(error))
                                unit.lastSeq = nil
                            }
                        }
                        return events
                    },
                    afterCommit: { sequencer.submitCommitted($0, epoch: epoch) })
            } else {
                _ = try backend.commitLikes(
                    units.map(\.likeUnit),
                    join: { count in
                        // Units queued while this transaction ran join it.
                        let more = topUp?(count) ?? []
                        units += more
                        return more.map(\.likeUnit)
                    },
                    afterCommit: { outcomes in
                        var events: [EventRecord] = []
                        record(outcomes, of: units, into: &events)
                        sequencer.submitCommitted(events, epoch: epoch)
                    })
            }
        } catch {
            // The transaction (or its COMMIT) failed: nothing of the batch committed. Alone, the transaction itself
            // isolated the unit; with others, the batch runs again isolated.
            if !isolated, units.count > 1 { return false }
            let batchFailure = FeedError.wrap(error)
            for unit in units {
                if case .failure = unit.outcome {} else { unit.outcome = .failure(batchFailure) }
                unit.lastSeq = nil
            }
        }
        return true
    }

    /// Gives each unit its outcome from the backend's results and collects the events they appended.
    private static func record(
        _ outcomes: [Result<[LikeOutcome], StorageError>], of units: some Collection<Unit>, into events: inout [EventRecord]
    ) {
        for (unit, outcome) in zip(units, outcomes) {
            switch outcome {
            case .success(let list):
                unit.outcome = .success(
                    zip(unit.commands, list).map { command, done in
                        LikeResult(
                            postID: command.postID, userID: command.userID, liked: done.liked, likeCount: done.likeCount,
                            changed: done.event != nil, seq: done.event?.seq)
                    })
                let unitEvents = list.compactMap(\.event)
                unit.lastSeq = unitEvents.last?.seq
                events += unitEvents
            case .failure(let error):
                unit.outcome = .failure(FeedError.wrap(error))
                unit.lastSeq = nil
            }
        }
    }
}
