/// Whether a service is open, and the tasks waiting in ``FeedService/run()`` for its end.
final class ServiceLifecycle: Sendable {
    private struct State {
        var closed = false
        /// Why the runs end, when it is neither cancellation nor ``close()``: the shared watch stopped for good.
        var ending: FeedError?
        var nextRun: UInt64 = 0
        /// The runs waiting, by id.
        var runs: [UInt64: CheckedContinuation<FeedError?, Never>] = [:]
        /// Runs whose task was cancelled before they waited.
        var cancelled: Set<UInt64> = []
    }

    private let state = Locked(State())

    /// Whether ``close()`` was called.
    var isClosed: Bool { state.withLock { $0.closed } }

    /// Marks the service closed and ends every run; returns whether it was open.
    func close() -> Bool {
        let (wasOpen, runs) = state.withLock { state -> (Bool, [CheckedContinuation<FeedError?, Never>]) in
            defer {
                state.closed = true
                state.runs = [:]
            }
            return (!state.closed, Array(state.runs.values))
        }
        for run in runs { run.resume(returning: nil) }
        return wasOpen
    }

    /// Ends every run with `error` (they throw it); later runs end at once with it too.
    func end(with error: FeedError) {
        let runs = state.withLock { state -> [CheckedContinuation<FeedError?, Never>] in
            if state.ending == nil { state.ending = error }
            defer { state.runs = [:] }
            return Array(state.runs.values)
        }
        for run in runs { run.resume(returning: error) }
    }

    /// Waits until the calling task is cancelled, the service is closed, or ``end(with:)``.
    ///
    /// - Returns: the error the run ends with, `nil` for cancellation or ``close()``.
    func waitForEnd() async -> FeedError? {
        let id = state.withLock { state in
            defer { state.nextRun += 1 }
            return state.nextRun
        }
        defer { _ = state.withLock { $0.cancelled.remove(id) } }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<FeedError?, Never>) in
                let now = state.withLock { state -> FeedError?? in
                    if state.closed || state.cancelled.contains(id) { return .some(nil) }
                    if let ending = state.ending { return .some(ending) }
                    state.runs[id] = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let run = state.withLock { state -> CheckedContinuation<FeedError?, Never>? in
                guard let run = state.runs.removeValue(forKey: id) else {
                    // Not waiting yet (or done): the wait sees this and returns at once.
                    state.cancelled.insert(id)
                    return nil
                }
                return run
            }
            run?.resume(returning: nil)
        }
    }
}
