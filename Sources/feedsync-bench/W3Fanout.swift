import FeedSync
import Foundation
import Synchronization

/// W3: `0..<events` through `PassthroughPublisher` and `CurrentValuePublisher` to S `sink`s, and through `values`
/// to one consumer task, beside a plain `AsyncStream` measured the same way in the same run (the peer's method).
enum W3Fanout {
    /// One sink's running sum; written only by the sending thread, read after sending ended.
    final class Sum: Sendable {
        nonisolated(unsafe) var value = 0
    }

    static func run(_ args: Arguments) throws -> Bool {
        let events = try args.int("events", 1_000_000)
        let fanouts = try args.intList("subscribers", [1, 10, 100])
        try args.finish()
        let expected = events * (events - 1) / 2

        var line = JSONLine()
        line.add("workload", "w3")
        line.add("impl", "feedsync")
        line.add("events", events)
        line.add("unit", "deliveries_per_s")
        var ok = true
        for subscribers in fanouts {
            let (rate, sumsOK) = fanout(PassthroughPublisher<Int, Never>(), subscribers: subscribers, events: events) { $0.send($1) }
            line.add("passthrough_s\(subscribers)", rate, digits: 0)
            ok = ok && sumsOK
        }
        for subscribers in fanouts {
            let (rate, sumsOK) = fanout(CurrentValuePublisher<Int, Never>(0), subscribers: subscribers, events: events) { $0.send($1) }
            line.add("currentvalue_s\(subscribers)", rate, digits: 0)
            ok = ok && sumsOK
        }
        if fanouts.contains(1) {
            let (valuesRate, valuesSum) = values(events: events)
            let (streamRate, streamSum) = asyncStream(events: events)
            line.add("values_s1", valuesRate, digits: 0)
            line.add("asyncstream_s1", streamRate, digits: 0)
            line.add("values_vs_asyncstream", valuesRate / streamRate, digits: 2)
            ok = ok && valuesSum == expected && streamSum == expected
        }
        line.finish(ok: ok)
        return ok
    }

    /// Deliveries per second (events × subscribers / s) and whether every sum is n(n-1)/2. The current-value
    /// publisher's initial 0 adds nothing.
    private static func fanout<P: Publisher>(
        _ publisher: P, subscribers: Int, events: Int, send: (P, Int) -> Void
    ) -> (Double, Bool) where P.Output == Int, P.Failure == Never {
        let sums = (0..<subscribers).map { _ in Sum() }
        let tokens = sums.map { sum in publisher.sink { sum.value &+= $0 } }
        let start = monotonicNanos()
        for value in 0..<events { send(publisher, value) }
        let elapsed = seconds(since: start)
        withExtendedLifetime(tokens) {}
        let expected = events * (events - 1) / 2
        return (Double(events * subscribers) / elapsed, sums.allSatisfy { $0.value == expected })
    }

    /// `PassthroughPublisher.values` to one detached consumer task; the producer sends from this thread. Timed
    /// from the first send until the consumer has seen the completion. The iterator subscribes before the first
    /// send so no value is missed.
    private static func values(events: Int) -> (Double, Int) {
        let subject = PassthroughPublisher<Int, Never>()
        let start = monotonicNanos()
        var iterator = subject.values.makeAsyncIterator()
        let consumer = Task.detached {
            var sum = 0
            while let value = await iterator.next() { sum &+= value }
            return sum
        }
        for value in 0..<events { subject.send(value) }
        subject.send(completion: .finished)
        let sum = wait(for: consumer)
        return (Double(events) / seconds(since: start), sum)
    }

    /// The baseline: `AsyncStream` (unbounded) to one detached consumer task, timed the same way.
    private static func asyncStream(events: Int) -> (Double, Int) {
        let (stream, continuation) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .unbounded)
        let start = monotonicNanos()
        let consumer = Task.detached {
            var sum = 0
            for await value in stream { sum &+= value }
            return sum
        }
        for value in 0..<events { continuation.yield(value) }
        continuation.finish()
        let sum = wait(for: consumer)
        return (Double(events) / seconds(since: start), sum)
    }

    /// Blocks this (non-pool) thread until `task` has finished and returns its value.
    private static func wait<T: Sendable>(for task: Task<T, Never>) -> T {
        let done = DispatchSemaphore(value: 0)
        let result = ResultBox<T>()
        Task.detached {
            result.set(await task.value)
            done.signal()
        }
        done.wait()
        return result.get()
    }
}

/// Hands a task's value to a blocked thread.
final class ResultBox<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)

    func set(_ newValue: T) { value.withLock { $0 = newValue } }

    func get() -> T {
        guard let stored = value.withLock({ $0 }) else { preconditionFailure("ResultBox read before it was set") }
        return stored
    }
}
