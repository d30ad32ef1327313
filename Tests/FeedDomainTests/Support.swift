import FeedDependencies
import FeedDomain
import FeedPublishers
import FeedStorage
import FeedTestSupport
import Foundation
import Synchronization

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
    private let log = LockedLog<Value>()
    private let cancellable = Mutex<AnyCancellable?>(nil)

    init<P: Publisher>(_ publisher: P) where P.Output == Value, P.Failure == Never {
        let token = publisher.sink { [log] value in log.append(value) }
        cancellable.withLock { $0 = token }
    }

    var values: [Value] { log.values }

    /// Waits until `predicate` holds for what was received, at most `seconds`.
    func wait(seconds: Double = 10, until predicate: ([Value]) -> Bool) -> Bool {
        log.wait(seconds: seconds, until: predicate)
    }
}
