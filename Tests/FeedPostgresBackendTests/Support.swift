// Helpers shared by the PostgreSQL backend tests.
import FeedCore
@testable import FeedPostgresBackend
import FeedTestSupport
import Foundation
import Testing

/// The bound for every wait in these tests.
let stallLimit: Duration = .seconds(30)

/// A fresh database and a backend on it, for one test; both go away when the value is released.
final class TestDatabase: Sendable {
    let database: PostgresTestDatabase
    let backend: PostgresBackend

    /// A new database named after `label` with a migrated backend; `nil` when no test server is configured.
    static func make(_ label: String, options: PostgresOptions = PostgresOptions()) throws -> TestDatabase? {
        guard let database = try PostgresTestDatabase.make(label) else { return nil }
        do {
            return TestDatabase(database: database, backend: try PostgresBackend(url: database.url, options: options))
        } catch {
            database.drop()
            throw error
        }
    }

    private init(database: PostgresTestDatabase, backend: PostgresBackend) {
        self.database = database
        self.backend = backend
    }

    deinit {
        backend.close()
        database.drop()
    }

    var url: String { database.url }

    /// Runs one statement as the test server's role, on the test database.
    @discardableResult
    func admin(_ sql: String, _ arguments: [DatabaseValue] = []) throws -> [[DatabaseValue]] {
        try PostgresAdmin.execute(url: database.url, sql, arguments)
    }
}

/// A write with nothing to do after commit.
@discardableResult
func write<T>(_ backend: PostgresBackend, _ body: (any FeedTransaction) throws -> T) throws -> T {
    try backend.write(body, afterCommit: { _ in })
}

/// The fixed time of the tests' rows.
let testTime = Date(timeIntervalSince1970: 1_700_000_000.123)

/// Adds users `u1…un` and a post `p1` by `u1`.
func seedUsersAndPost(_ backend: PostgresBackend, users: Int = 2) throws {
    try write(backend) { tx throws in
        for index in 1...users { _ = try tx.insertUser(id: "u\(index)", name: "User \(index)", at: testTime) }
        _ = try tx.insertPost(id: "p1", authorID: "u1", body: "hello", at: testTime)
    }
}

/// Waits for `semaphore` at most ``stallLimit``; records a failure naming `what` on a stall.
@discardableResult
func waitFor(_ semaphore: DispatchSemaphore, _ what: String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
    if semaphore.wait(timeout: .now() + .seconds(Int(stallLimit.components.seconds))) == .timedOut {
        Issue.record("stalled for \(stallLimit) waiting for \(what)", sourceLocation: sourceLocation)
        return false
    }
    return true
}

/// Polls `condition` (every 5 ms) until it holds or ``stallLimit`` passes; records a failure naming `what` on a
/// stall. For states of the server that have no notification (a backend waiting for a lock, a session gone).
@discardableResult
func waitUntil(_ what: String, sourceLocation: SourceLocation = #_sourceLocation, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + stallLimit
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        usleep(5_000)
    }
    Issue.record("stalled for \(stallLimit) waiting until \(what)", sourceLocation: sourceLocation)
    return false
}

/// Runs `body` on a new thread; the returned group is left when it ends.
func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) -> DispatchGroup {
    let group = DispatchGroup()
    group.enter()
    let thread = Thread {
        body()
        group.leave()
    }
    thread.name = name
    thread.start()
    return group
}

/// Waits for threads started with ``spawn(_:_:)`` at most ``stallLimit``.
func join(_ groups: [DispatchGroup], sourceLocation: SourceLocation = #_sourceLocation) {
    let deadline = DispatchTime.now() + .seconds(Int(stallLimit.components.seconds))
    for group in groups where group.wait(timeout: deadline) == .timedOut {
        Issue.record("a test thread stalled for \(stallLimit)", sourceLocation: sourceLocation)
        return
    }
}

/// A value shared by test threads, behind a lock.
final class Shared<Value: Sendable>: @unchecked Sendable {
    // `@unchecked Sendable`: `value` is only touched while `lock` is held.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func update<R>(_ body: (inout Value) -> R) -> R { lock.withLock { body(&value) } }

    var current: Value { lock.withLock { value } }
}

/// The sessions of the test database that FeedSync opened (pool and watch connections), by process id.
func feedSyncSessions(_ db: TestDatabase) throws -> [Int64] {
    try db.admin(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'feedsync' AND pid <> pg_backend_pid()"
    ).compactMap { $0.first?.integer }
}

/// Terminates every FeedSync session on the test database and waits until they are gone.
func terminateFeedSyncSessions(_ db: TestDatabase) throws {
    let sessions = try feedSyncSessions(db)
    for pid in sessions { try db.admin("SELECT pg_terminate_backend($1::int)", [.integer(pid)]) }
    try waitUntil("the terminated sessions are gone") { try feedSyncSessions(db).isEmpty }
}

extension FeedTransaction {
    /// The PostgreSQL transaction behind the seam, for its row-level operations.
    var pg: PostgresTransaction { self as! PostgresTransaction }
}
