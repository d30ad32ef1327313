internal import FeedCore
internal import Foundation

// A durable subscriber's passes: catching up from the stored cursor in batches, transactionally or at least once,
// rebuilding from the tables when the log cannot replay, and retrying a failed live pass.
extension DurableSubscriber.Engine {
    /// Queues a pass unless one is queued already. A live-only pass is dropped when the subscriber stopped
    /// following changes before it started.
    func schedulePass(liveOnly: Bool) {
        let shouldSchedule = live.withLock { state -> Bool in
            if liveOnly && state.subscription == nil { return false }
            if let queuedIsLiveOnly = state.queuedPassIsLiveOnly {
                state.queuedPassIsLiveOnly = queuedIsLiveOnly && liveOnly
                return false
            }
            state.queuedPassIsLiveOnly = liveOnly
            return true
        }
        guard shouldSchedule else { return }
        queue.async { [self] in
            do {
                _ = try takingTurn { try pass(scheduled: true) }
                live.withLock { $0.retryDelay = .zero }
            } catch {
                // After close() the backend refuses everything: say so, not what it refused with.
                let failure = service.isClosed ? FeedError.serviceClosed : FeedError.wrap(error, value: name)
                signals.send(.failed(failure))
                retryAfterFailure(failure)
            }
        }
    }

    /// After a failed live pass (a lost connection, a busy database, a failing handler), runs another one after
    /// a pause that doubles from 10 ms up to 2 s, for as long as the subscriber follows live changes. The event
    /// that scheduled the failed pass is still unapplied: waiting for the next commit to retry would leave it so
    /// in a quiet system. A closed service ends the retries.
    func retryAfterFailure(_ failure: FeedError) {
        let delay = live.withLock { state -> Duration? in
            guard state.subscription != nil, !service.isClosed else { return nil }
            state.retryDelay = min(max(state.retryDelay * 2, .milliseconds(10)), .seconds(2))
            return state.retryDelay
        }
        guard let delay else { return }
        service.log(
            .subscriberRetrying, .warning,
            "durable subscriber \(FeedError.quoted(name)) failed a pass and retries in \(FeedService.milliseconds(delay)) ms: \(failure)",
            ["subscriber": name, "error": failure.description, "retryMilliseconds": "\(FeedService.milliseconds(delay))"])
        let (seconds, attoseconds) = delay.components
        let nanoseconds = Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
        queue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
            self?.schedulePass(liveOnly: true)
        }
    }

    /// Runs `body` holding the subscriber's turn: one pass at a time, whichever thread runs it.
    func takingTurn<T>(_ body: () throws -> T) throws -> T {
        turn.lock()
        defer { turn.unlock() }
        return try body()
    }

    /// One pass: rebuild if needed, then apply batches until the log is exhausted or the subscriber stops. Runs
    /// holding `turn`.
    func pass(scheduled: Bool) throws -> Int {
        let epoch = live.withLock { state -> UInt64? in
            if scheduled {
                let liveOnly = state.queuedPassIsLiveOnly ?? true
                state.queuedPassIsLiveOnly = nil
                if liveOnly && state.subscription == nil { return nil }
            }
            state.passThread = pthread_self()
            return state.stopEpoch
        }
        guard let epoch else { return 0 }
        defer { live.withLock { $0.passThread = nil } }
        let stopped = { [live] in live.withLock { $0.stopEpoch != epoch } }

        var applied = 0
        while !stopped() {
            let outcome: BatchOutcome
            switch delivery {
            case .transactional(let apply): outcome = try transactionalBatch(apply, stopped: stopped)
            case .atLeastOnce(let handle): outcome = try atLeastOnceBatch(handle, stopped: stopped)
            }
            switch outcome {
            case .needsRebuild(let cursor, let through):
                signals.send(.needsRebuild(cursor: cursor, prunedThrough: through))
                if stopped() { return applied }
                try rebuildState(cursor: cursor, through: through)
            case .applied(let count, let through, let stoppedDuringBatch):
                applied += count
                if stoppedDuringBatch { return applied }
                if count < batchSize {
                    signals.send(.caughtUp(seq: through))
                    return applied
                }
            }
        }
        return applied
    }

    /// Reads the position, applies up to a batch and advances the cursor, all in one write transaction.
    func transactionalBatch(
        _ apply: @Sendable (EventRecord, SubscriberTransaction) throws -> Void, stopped: () -> Bool
    ) throws -> BatchOutcome {
        try service.backend.write(
            { tx in
                let position = try tx.subscriberPosition(for: name) ?? .start
                if let through = try tx.replayBaseline().rebuildPoint(for: position) {
                    return .needsRebuild(cursor: position.lastSeq, through: through)
                }
                var count = 0
                var last = position.lastSeq
                var stoppedDuringBatch = false
                let handle = SubscriberTransaction(tx)
                for event in try tx.events(after: position.lastSeq, limit: batchSize) {
                    if stopped() {
                        stoppedDuringBatch = true
                        break
                    }
                    try handling(event) {
                        try apply(event, handle)
                        try handle.rethrowFailure()
                    }
                    last = event.seq
                    count += 1
                }
                if count > 0 { _ = try tx.advanceSubscriberCursor(last, for: name, at: Date()) }
                return .applied(count: count, through: last, stopped: stoppedDuringBatch || stopped())
            }, afterCommit: { _ in })
    }

    /// Reads the position and a batch in one snapshot, hands the events to the handler outside any transaction,
    /// then moves the cursor forward (never back) past the events handled.
    func atLeastOnceBatch(_ handle: @Sendable (EventRecord) throws -> Void, stopped: () -> Bool) throws -> BatchOutcome {
        let backend = service.backend
        let (position, rebuildPoint, events) = try backend.read { tx in
            let position = try tx.subscriberPosition(for: name) ?? .start
            let point = try tx.replayBaseline().rebuildPoint(for: position)
            return (position, point, point == nil ? try tx.events(after: position.lastSeq, limit: batchSize) : [])
        }
        if let rebuildPoint { return .needsRebuild(cursor: position.lastSeq, through: rebuildPoint) }
        var last = position.lastSeq
        var handled = 0
        var stoppedDuringBatch = false
        defer {
            if last > position.lastSeq {
                _ = try? backend.write(
                    { tx in try tx.advanceSubscriberCursor(last, for: name, at: Date()) }, afterCommit: { _ in })
            }
        }
        for event in events {
            if stopped() {
                stoppedDuringBatch = true
                break
            }
            try handling(event) { try handle(event) }
            last = event.seq
            handled += 1
        }
        return .applied(count: handled, through: last, stopped: stoppedDuringBatch || stopped())
    }

    /// Runs the handler (or rebuild) for `event` (`nil` for a rebuild). What it throws is carried as
    /// ``FeedError/handlerFailed(subscriber:seq:error:)``, except a database failure under it (a ``StorageError``,
    /// or a ``FeedError/storage(_:)``), which stays one: the backend retries or reports it as any other.
    func handling(_ event: EventRecord?, _ body: () throws -> Void) throws {
        do {
            try body()
        } catch let error as StorageError {
            throw error
        } catch FeedError.storage(let error) {
            throw error
        } catch {
            throw FeedError.handlerFailed(subscriber: name, seq: event?.seq, error: FeedError.HandlerError(error))
        }
    }

    /// Rebuilds the state from the tables and moves the cursor to the end of the log, in one transaction — unless
    /// another instance under the same name did it meanwhile. Without a rebuild closure, the subscriber cannot go
    /// on: ``FeedError/historyPruned(after:prunedThrough:)``.
    func rebuildState(cursor: Int64, through: Int64) throws {
        guard let rebuild else { throw FeedError.historyPruned(after: cursor, prunedThrough: through) }
        let seq = try service.backend.write(
            { tx -> Int64? in
                let baseline = try tx.replayBaseline()
                guard baseline.rebuildPoint(for: try tx.subscriberPosition(for: name) ?? .start) != nil else { return nil }
                let last = try tx.lastSeq()
                let handle = SubscriberTransaction(tx)
                try handling(nil) {
                    try rebuild(handle)
                    try handle.rethrowFailure()
                }
                try tx.markSubscriberRebuilt(name, through: last, bulkGeneration: baseline.bulkGeneration, at: Date())
                return last
            }, afterCommit: { _ in })
        if let seq { signals.send(.rebuilt(seq: seq)) }
    }
}
