import FeedSync
import FeedCore
import FeedDependencies
@testable import FeedDomain
import FeedPublishers
import FeedSQLiteBackend
import FeedTestSupport
import Foundation

/// A file-backed service with three users and posts post1…post3, built with deterministic time and ids.
/// A seeded service on `backend` (3 users, 3 posts), or `nil` when that backend's test server is not configured.
func makeService(in dir: TemporaryDirectory, on backend: TestBackend, bridge: EventBridge = EventBridge()) throws -> FeedService? {
    guard let location = try backend.makeLocation(in: dir) else { return nil }
    return try makeService(at: location, bridge: bridge)
}

/// A seeded service (3 users, 3 posts) on the database at `location` (a path or a URL).
func makeService(
    at location: String, options: FeedOpenOptions = FeedOpenOptions(), bridge: EventBridge = EventBridge(),
    logger: FeedLogger? = nil
) throws -> FeedService {
    try withDependencies {
        $0.date = .constant(Date(timeIntervalSince1970: 1_700_000_000))
        $0.uuid = .incrementing
    } operation: {
        let service = try FeedService(location: location, options: options, bridge: bridge, logger: logger)
        for user in ["user1", "user2", "user3"] { try service.createUser(id: user) }
        for i in 1...3 { try service.createPost(id: "post\(i)", authorID: "user1", body: "body \(i)") }
        service.settle()
        return service
    }
}

func makeService(in dir: TemporaryDirectory, bridge: EventBridge = EventBridge()) throws -> FeedService {
    try withDependencies {
        $0.date = .constant(Date(timeIntervalSince1970: 1_700_000_000))
        $0.uuid = .incrementing
    } operation: {
        let service = try FeedService(path: dir.file("feed.sqlite"), bridge: bridge)
        for user in ["user1", "user2", "user3"] { try service.createUser(id: user) }
        for i in 1...3 { try service.createPost(id: "post\(i)", authorID: "user1", body: "body \(i)") }
        service.settle()
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

extension FeedService {
    /// Waits until every event this service's bridge knows of was delivered (set-up commits included), so that a
    /// subscriber added next sees only what comes after.
    func settle() {
        let known = bridge.sequencer.highestKnownSeq ?? 0
        precondition(waitForDelivery(through: known, timeout: .seconds(30)), "delivery did not reach seq \(known)")
    }
}

extension FeedService {
    /// The SQLite store under a service opened on a file or in memory — for tests that reach the SQLite backend
    /// directly (raw SQL, its connections).
    var store: FeedStore {
        guard let store = backend as? FeedStore else { preconditionFailure("this test needs the SQLite backend") }
        return store
    }
}

extension FeedService {
    /// Creates a service over an open SQLite store.
    convenience init(store: FeedStore, bridge: EventBridge = EventBridge()) throws(FeedError) {
        try self.init(backend: store, bridge: bridge)
    }
}

/// A value a test binds with ``FeedTransaction/run(_:_:)``.
protocol TestBindable {
    var databaseValue: DatabaseValue { get }
}

extension String: TestBindable {
    var databaseValue: DatabaseValue { .text(self) }
}

extension Int64: TestBindable {
    var databaseValue: DatabaseValue { .integer(self) }
}

extension FeedTransaction {
    /// Runs one statement written with `?` placeholders (numbered `$1`, `$2`, … here, as every backend accepts).
    @discardableResult
    func run(_ sql: String, _ values: any TestBindable...) throws -> Int {
        try userStatements.execute(numberingPlaceholders(sql), values.map(\.databaseValue))
    }
}

extension SubscriberTransaction {
    /// Runs one statement written with `?` placeholders (numbered `$1`, `$2`, … here, as every backend accepts).
    @discardableResult
    func run(_ sql: String, _ values: any TestBindable...) throws -> Int {
        try execute(numberingPlaceholders(sql), values.map(\.databaseValue))
    }
}

/// `sql` with each `?` replaced by `$1`, `$2`, … in order.
private func numberingPlaceholders(_ sql: String) -> String {
    var numbered = ""
    var next = 0
    for character in sql {
        if character == "?" {
            next += 1
            numbered += "$\(next)"
        } else {
            numbered.append(character)
        }
    }
    return numbered
}

extension FeedService {
    /// Runs SQL of the test's own (valid on both backends) in one write transaction.
    func executeSQL(_ sql: String) throws {
        _ = try backend.write({ tx in try tx.userStatements.execute(sql) }, afterCommit: { _ in })
    }

    /// The first column of every row a query of the test's own returns.
    func firstColumn(_ sql: String) throws -> [DatabaseValue] {
        try backend.read { tx in try tx.userStatements.fetch(sql, []).compactMap(\.first) }
    }
}
