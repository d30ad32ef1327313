internal import Foundation

/// The server's shared state that threads wait on: the highest committed seq seen, whether the server stops, and
/// how many requests are in flight.
///
/// One bridge sink for the whole server calls ``noteCommitted(_:)``; every event stream's reader waits in
/// ``waitForCommit(after:timeout:)`` on the connection's own thread; ``HTTPServer/stop()`` waits in
/// ``waitForIdle(until:)`` for the requests still running. Nobody calls out while holding the lock.
///
/// `@unchecked Sendable`: every stored property is read and written only with `condition` locked.
final class ServerSignals: @unchecked Sendable {
    private let condition = NSCondition()
    private var highestSeq: Int64
    private var stopping = false
    private var inFlight = 0

    /// Starts at `lastSeq`, the log's last seq when the server started.
    init(lastSeq: Int64) {
        highestSeq = lastSeq
    }

    /// Whether ``stop()`` was called.
    var isStopping: Bool {
        condition.lock()
        defer { condition.unlock() }
        return stopping
    }

    /// The highest seq committed that the bridge delivered (or the log's last when the server started).
    var lastSeq: Int64 {
        condition.lock()
        defer { condition.unlock() }
        return highestSeq
    }

    /// Records a committed seq and wakes the event streams (the bridge sink, on the delivery executor).
    func noteCommitted(_ seq: Int64) {
        condition.lock()
        if seq > highestSeq { highestSeq = seq }
        condition.broadcast()
        condition.unlock()
    }

    /// Marks the server as stopping and wakes every waiter.
    func stop() {
        condition.lock()
        stopping = true
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until a seq after `seq` was committed, the server stops, or `timeout` seconds pass.
    ///
    /// - Returns: `false` when it timed out with nothing new.
    func waitForCommit(after seq: Int64, timeout: Double) -> Bool {
        let deadline = Date(timeIntervalSinceNow: timeout)
        condition.lock()
        defer { condition.unlock() }
        while highestSeq <= seq, !stopping {
            if !condition.wait(until: deadline) { return highestSeq > seq || stopping }
        }
        return true
    }

    /// Counts a request that reached the handler.
    func requestStarted() {
        condition.lock()
        inFlight += 1
        condition.unlock()
    }

    /// Counts a request libmicrohttpd finished (answered, or its connection closed).
    func requestEnded() {
        condition.lock()
        inFlight -= 1
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until no request is in flight or `deadline` passes; returns whether none is.
    func waitForIdle(until deadline: Date) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while inFlight > 0 {
            if !condition.wait(until: deadline) { return inFlight == 0 }
        }
        return true
    }
}
