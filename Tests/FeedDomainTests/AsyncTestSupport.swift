import FeedSQLite
import Foundation

// Bounded waits for async tests, and a holder of SQLite's write lock.

/// A bounded wait in a test ran out.
struct TestTimeout: Error, CustomStringConvertible {
    let what: String
    var description: String { "timed out waiting for \(what)" }
}

/// How much longer than its stated bound an async test waits. The suites run in parallel on two cores next to the
/// stress and fault tests' child processes and PostgreSQL server, so an async test's continuations may wait long to
/// resume. (The synchronous suites do not hold Swift's cooperative threads while they block: they run on threads
/// of their own, `.ownThreads`.) The bounds stay bounds: a real stall still fails, later.
let asyncTestSlack = 5.0

/// Runs `operation`, throwing ``TestTimeout`` (and cancelling it) when it takes more than `seconds` (× the slack).
func within<T: Sendable>(
    _ seconds: Double, _ what: String, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try? await Task.sleep(for: .seconds(seconds * asyncTestSlack))
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw TestTimeout(what: what) }
        return value
    }
}

/// The value of `task`, cancelling the task when it takes more than `seconds`.
func value<T: Sendable>(of task: Task<T, any Error>, within seconds: Double, _ what: String) async throws -> T {
    try await within(seconds, what) {
        try await withTaskCancellationHandler {
            try await task.value
        } onCancel: {
            task.cancel()
        }
    }
}

/// The value of `task`, cancelling the task when it takes more than `seconds`.
func value<T: Sendable>(of task: Task<T, Never>, within seconds: Double, _ what: String) async throws -> T {
    try await within(seconds, what) {
        await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
    }
}

/// Waits for `count` elements of `stream`, at most `seconds`.
func receive(_ count: Int, from stream: AsyncStream<Void>, within seconds: Double, _ what: String) async throws {
    try await within(seconds, what) {
        var received = 0
        for await _ in stream {
            received += 1
            if received == count { return }
        }
        throw TestTimeout(what: what)
    }
}

/// Holds SQLite's write lock on a database file from a connection of its own, on a thread of its own, until
/// ``unlock()`` (or 30 seconds at most).
final class WriteLockHolder: Sendable {
    private let release = DispatchSemaphore(value: 0)
    private let released = Box(false)

    /// Opens a connection and takes the write lock (`BEGIN IMMEDIATE`); returns once it holds it.
    func lock(path: String) async throws {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            let release = release
            Thread {
                do {
                    let db = try Connection(location: .file(path))
                    try db.execute("BEGIN IMMEDIATE")
                    continuation.resume()
                    _ = release.wait(timeout: .now() + 30 * asyncTestSlack)
                    try? db.execute("ROLLBACK")
                    db.close()
                } catch {
                    continuation.resume(throwing: error)
                }
            }.start()
        }
    }

    /// Lets the holder roll back and close; a second call does nothing.
    func unlock() {
        let first = released.withLock { released in
            defer { released = true }
            return !released
        }
        if first { release.signal() }
    }
}
