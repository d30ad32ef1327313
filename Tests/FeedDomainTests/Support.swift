import FeedDependencies
import FeedDomain
import FeedPublishers
import FeedStorage
import FeedTestSupport
import Foundation

/// A file-backed service with three users and posts post1…post3, built with deterministic time and ids.
func makeService(in dir: TemporaryDirectory, bridge: EventBridge = EventBridge()) throws -> FeedService {
    try withDependencies {
        $0.date = .constant(Date(timeIntervalSince1970: 1_700_000_000))
        $0.uuid = .incrementing
    } operation: {
        let service = try FeedService(path: dir.file("feed.sqlite"), bridge: bridge)
        for user in ["user1", "user2", "user3"] { try service.createUser(id: user) }
        for i in 1...3 { try service.createPost(id: "post\(i)", authorID: "user1", body: "body \(i)") }
        return service
    }
}

/// Collects what a publisher delivers, safely from any thread.
final class Recorder<Value: Sendable>: Sendable {
    private let log: LockedLog<Value>
    private let cancellable: AnyCancellable

    init<P: Publisher>(_ publisher: P) where P.Output == Value, P.Failure == Never {
        let log = LockedLog<Value>()
        self.log = log
        cancellable = publisher.sink { value in log.append(value) }
    }

    var values: [Value] { log.values }

    /// Waits until `predicate` holds for what was received, at most `seconds`.
    func wait(seconds: Double = 10, until predicate: ([Value]) -> Bool) -> Bool {
        log.wait(seconds: seconds, until: predicate)
    }
}

/// A value behind an `NSLock` (visible to ThreadSanitizer, unlike `Synchronization.Mutex`).
final class Box<Value>: @unchecked Sendable {
    // `@unchecked Sendable`: `value` is only touched while `lock` is held.
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
