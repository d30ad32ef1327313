import Dispatch
import FeedTestThreads
import Foundation
import Synchronization

/// A failure type for failing publishers in tests.
struct TestError: Error, Equatable {
    var code = 1
}

/// A thread-safe list of received values.
final class Received<Value: Sendable>: Sendable {
    private let storage = Locked<[Value]>([])

    func append(_ value: Value) {
        storage.withLock { $0.append(value) }
    }

    var values: [Value] { storage.withLock { $0 } }

    var count: Int { storage.withLock { $0.count } }
}

/// An object whose lifetime tests observe with weak references.
final class LifetimeProbe: Sendable {
    let counter = Atomic<Int>(0)
}

/// Returns once every block enqueued on the main queue before this call has run (FIFO barrier).
func drainMainQueue() async {
    await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
        DispatchQueue.main.async { continuation.resume() }
    }
}

/// Runs `body` on `count` new threads at once and waits (bounded) for all of them.
func runOnThreads(_ count: Int, timeout seconds: Double = 60, _ body: @escaping @Sendable (Int) -> Void) -> Bool {
    let done = DispatchSemaphore(value: 0)
    startThreads(count, signalling: done, body)
    let deadline = DispatchTime.now() + seconds
    for _ in 0..<count where done.wait(timeout: deadline) == .timedOut {
        return false
    }
    return true
}

/// Runs `body` on `count` new threads at once and waits for all of them while they make progress.
///
/// A stress test's watchdog: it fails on a *stall* — `progress()` (a count the threads raise as they work) not
/// rising for `stallAfter` seconds — rather than on a fixed total time, which a loaded CI machine running the
/// ThreadSanitizer suites in parallel can exceed without anything being stuck. `limit` still bounds the whole run.
/// On a stall it prints the progress reached, so the failure says where the threads stopped.
func runOnThreads(
    _ count: Int, stallAfter seconds: Double = 30, limit: Double = 600, progress: @escaping @Sendable () -> Int,
    _ body: @escaping @Sendable (Int) -> Void
) -> Bool {
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        Thread {
            body(index)
            done.leave()
        }.start()
    }
    return waitWhileProgressing("runOnThreads (\(count) threads)", stallAfter: seconds, limit: limit, progress: progress) {
        done.wait(timeout: $0)
    }
}

private func startThreads(_ count: Int, signalling done: DispatchSemaphore, _ body: @escaping @Sendable (Int) -> Void) {
    for index in 0..<count {
        let thread = Thread {
            body(index)
            done.signal()
        }
        thread.start()
    }
}

/// A one-shot gate that async code waits on without blocking a thread.
final class AsyncGate: Sendable {
    private struct State {
        var isOpen = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    private let state = Locked(State())

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.isOpen = true
            let waiters = state.waiters
            state.waiters = []
            return waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.isOpen { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}
