internal import Foundation

/// The library's serial executors: a bridge's delivery queue, each projection's queue and each durable subscriber's
/// queue. User code the library calls runs on one of them.
///
/// The one rule that keeps waits acyclic: **code running on an executor never blocks waiting for another executor**
/// — with one exception, the delivery queue, which waits for a projection's queue to apply an event (a projection's
/// queue waits for nothing but the database). So `send` on a projection from inside a callback queues the action
/// and returns, `catchUp()` from inside one schedules a pass, and `waitForDelivery(through:)` from inside one
/// returns `false` at once. Commands never wait for an executor: they end at `COMMIT`.
enum FeedExecutor {
    /// Marks a queue as one of the library's executors (GCD's queue-specific data, which follows `sync`).
    private static let key = DispatchSpecificKey<Bool>()

    /// A new serial executor.
    static func makeQueue(label: String) -> DispatchQueue {
        let queue = DispatchQueue(label: label)
        queue.setSpecific(key: key, value: true)
        return queue
    }

    /// Whether the caller runs on one of the library's executors (inside a callback), where it must not wait.
    static var isCurrent: Bool {
        DispatchQueue.getSpecific(key: key) == true
    }
}
