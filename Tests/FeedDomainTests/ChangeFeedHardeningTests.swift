import FeedSync
@testable import FeedDomain
import FeedCore
import FeedPublishers
import FeedSQLite
@testable import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import FeedTestThreads
import Testing

/// The change feed's edge cases: a database file deleted or replaced while followed, `stop()` called on the feed's
/// own thread, what its file watcher wakes for, and what a `Mirror` walk from a feed can reach.
// Blocks: waits for the change feed to report a replaced database and to deliver.
@Suite(.ownThreads) struct ChangeFeedHardeningTests {
    // MARK: - A deleted or replaced database file

    @Test(arguments: [true, false])
    func deletedDatabaseFileIsReportedAndTheFeedStops(watchFiles: Bool) throws {
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        let service = try makeService(in: dir)
        let feed = ChangeFeed(service: service, options: Self.options(watchFiles: watchFiles))
        let errors = Recorder(feed.errors)
        try feed.start()
        defer { feed.stop() }
        #expect(unlink(path) == 0)
        #expect(errors.wait { $0.contains(.databaseReplaced(path: path)) })
        #expect(!feed.isRunning)
        #expect(feed.waitUntilStopped(timeout: .seconds(10)))
        #expect(errors.values == [.databaseReplaced(path: path)])
    }

    @Test(arguments: [true, false])
    func databaseReplacedByRenameIsReportedAndTheFeedStops(watchFiles: Bool) throws {
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        let service = try makeService(in: dir)
        // Another database, closed (so its log is checkpointed), then moved over the followed one.
        let replacement = try FeedService(path: dir.file("other.sqlite"))
        try replacement.createUser(id: "someone")
        replacement.store.close()
        let feed = ChangeFeed(service: service, options: Self.options(watchFiles: watchFiles))
        let errors = Recorder(feed.errors)
        try feed.start()
        defer { feed.stop() }
        #expect(rename(dir.file("other.sqlite"), path) == 0)
        #expect(errors.wait { $0.contains(.databaseReplaced(path: path)) })
        #expect(!feed.isRunning)
        #expect(feed.waitUntilStopped(timeout: .seconds(10)))
        #expect(FeedError.databaseReplaced(path: path).category == .database)
    }

    @Test func anUnchangedFileKeepsTheFeedRunning() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let other = try FeedService(path: dir.file("feed.sqlite"))
        let feed = ChangeFeed(service: service, options: Self.options(watchFiles: true))
        let errors = Recorder(feed.errors)
        let received = Recorder(service.bridge.changes)
        try feed.start()
        defer { feed.stop() }
        // Writes through another connection touch -wal and -shm, never the database's identity.
        var last: Int64?
        for i in 0..<20 { last = try other.toggle(userID: "user2", postID: "post\(1 + i % 3)").seq }
        #expect(received.wait { $0.last?.seq == last })
        #expect(feed.isRunning)
        #expect(errors.values.isEmpty)
    }

    // MARK: - stop() from callbacks

    @Test func stopFromASubscriberReturnsAtOnce() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        // Another connection with its own bridge: its commits reach `service`'s bridge only through the feed, and
        // the sink runs on its own queue while the feed's thread goes on.
        let other = try FeedService(path: dir.file("feed.sqlite"))
        let feed = ChangeFeed(service: service)
        let returned = DispatchSemaphore(value: 0)
        let threads = LockedLog<pthread_t>()
        let stopTimes = LockedLog<Duration>()
        let subscription = service.bridge.changes.sink { _ in
            threads.append(pthread_self())
            let start = ContinuousClock.now
            feed.stop()
            stopTimes.append(ContinuousClock.now - start)
            returned.signal()
        }
        defer { subscription.cancel() }
        try feed.start()
        defer { feed.stop() }
        _ = try other.like(userID: "user2", postID: "post1")
        // The bound is for the other connection's commit to arrive on a loaded machine; stop() itself is timed below.
        #expect(returned.wait(timeout: .now() + 30) == .success)
        #expect(stopTimes.values.allSatisfy { $0 < .seconds(3) }, "stop() took \(stopTimes.values)")
        #expect(threads.values.count == 1)
        #expect(threads.values.allSatisfy { pthread_equal($0, pthread_self()) == 0 })
        #expect(!feed.isRunning)
        #expect(feed.waitUntilStopped(timeout: .seconds(10)))
    }

    @Test func stopFromAnErrorsSinkReturnsAtOnce() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        var options = ChangeFeed.Options()
        options.faultInjector = { throw SQLiteError(code: .busy, message: "database is locked") }
        let feed = ChangeFeed(service: service, options: options)
        let returned = DispatchSemaphore(value: 0)
        let subscription = feed.errors.sink { _ in
            feed.stop()
            returned.signal()
        }
        defer { subscription.cancel() }
        try feed.start()
        defer { feed.stop() }
        #expect(returned.wait(timeout: .now() + 3) == .success)
        #expect(!feed.isRunning)
        #expect(feed.waitUntilStopped(timeout: .seconds(10)))
    }

    @Test func releasingTheLastReferenceOnTheFeedsThreadDoesNotWaitForItself() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let other = try FeedService(path: dir.file("feed.sqlite"))
        let holder = Box<ChangeFeed?>(ChangeFeed(service: service))
        let returned = DispatchSemaphore(value: 0)
        let subscription = service.bridge.changes.sink { _ in
            // The feed's deinit runs here, on its own thread, and calls stop().
            guard holder.withLock({ feed in feed.take() }) != nil else { return }
            returned.signal()
        }
        defer { subscription.cancel() }
        try holder.withLock { feed in try feed?.start() }
        _ = try other.like(userID: "user3", postID: "post2")
        // A deinit that waited for its own thread would never return; the bound only has to outlast a loaded machine
        // (3 s did not once, in a full parallel run: the other process's commit itself arrived late).
        #expect(returned.wait(timeout: .now() + 30) == .success)
    }

    @Test func aFeedCanBeStartedAgainAfterStoppingItselfOnItsThread() throws {
        let dir = TemporaryDirectory()
        let service = try makeService(in: dir)
        let other = try FeedService(path: dir.file("feed.sqlite"))
        let feed = ChangeFeed(service: service)
        let stopOnce = Box(true)
        let stopped = DispatchSemaphore(value: 0)
        let subscription = service.bridge.changes.sink { _ in
            let first = stopOnce.withLock { first in
                defer { first = false }
                return first
            }
            if first {
                feed.stop()
                stopped.signal()
            }
        }
        defer { subscription.cancel() }
        let received = Recorder(service.bridge.changes)
        try feed.start()
        defer { feed.stop() }
        let first = try other.like(userID: "user2", postID: "post2")
        #expect(received.wait { $0.last?.seq == first.seq })
        // The sink runs on its own queue: the recorder may have the event before the sink's stop() ran.
        #expect(stopped.wait(timeout: .now() + 30) == .success)
        try feed.start()
        #expect(feed.isRunning)
        let second = try other.like(userID: "user3", postID: "post3")
        #expect(received.wait { $0.last?.seq == second.seq })
    }

    // MARK: - The file watcher

    @Test func watcherWakesForTheDatabasesFilesOnly() throws {
        let dir = TemporaryDirectory()
        let watcher = FileChangeWatcher(databasePath: dir.file("feed.sqlite"), enabled: true)
        try #require(watcher.isWatching)
        // Another file of the directory: read and ignored, the wait runs to its timeout.
        try Data("x".utf8).write(to: URL(fileURLWithPath: dir.file("notes.txt")))
        #expect(watcher.wait(timeout: .milliseconds(100)) == .timedOut)
        // A write to the -wal file, as every commit makes.
        try Data("x".utf8).write(to: URL(fileURLWithPath: dir.file("feed.sqlite-wal")))
        #expect(watcher.wait(timeout: .seconds(10)) == .fileChanged)
        // A file renamed over the database.
        #expect(rename(dir.file("notes.txt"), dir.file("feed.sqlite")) == 0)
        #expect(watcher.wait(timeout: .seconds(10)) == .fileChanged)
        #expect(unlink(dir.file("feed.sqlite")) == 0)
        #expect(watcher.wait(timeout: .seconds(10)) == .fileChanged)
        watcher.wake()
        #expect(watcher.wait(timeout: .seconds(10)) == .woken)
        // Nothing pending: a sub-millisecond timeout just passes.
        #expect(watcher.wait(timeout: .microseconds(200)) == .timedOut)
    }

    // MARK: - Reflection

    @Test(arguments: TestBackend.allCases) func aMirrorWalkFromAFeedReachesNothingThatSends(on backend: TestBackend) throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        var options = ChangeFeed.Options()
        options.faultInjector = {}
        let feed = ChangeFeed(service: service, options: options)
        let errors = Recorder(feed.errors)
        try feed.start()
        defer { feed.stop() }
        let found = Self.sendersReachable(from: feed)
        #expect(found.isEmpty, "reachable: \(found)")
        #expect(errors.values.isEmpty)
        // The walk does find what a leaky feed would hold: a stored subject, or a closure that sends.
        struct Holder {
            let subject = PassthroughPublisher<FeedError, Never>()
            let send: @Sendable (FeedError) -> Void = { _ in }
        }
        #expect(Self.sendersReachable(from: [Holder()]).count == 2)
    }

    // MARK: - Helpers

    static func options(watchFiles: Bool) -> ChangeFeed.Options {
        var options = ChangeFeed.Options()
        options.watchFiles = watchFiles
        // Without inotify, the tick is what notices the file change.
        options.pollInterval = .milliseconds(watchFiles ? 250 : 20)
        return options
    }

    /// The paths of values reachable through `Mirror` from `root` that can send: a subject, or a closure that code
    /// outside the library could cast to a callable type. The service's own subtree is left out (tested with it).
    static func sendersReachable(from root: Any) -> [String] {
        var found: [String] = []
        var visited = Set<ObjectIdentifier>()
        func visit(_ value: Any, _ path: String, depth: Int) {
            guard depth < 64, !(value is FeedService) else { return }
            let typeName = String(describing: type(of: value))
            if typeName.hasPrefix("PassthroughPublisher") || typeName.hasPrefix("CurrentValuePublisher")
                || typeName.hasPrefix("EventPublisher")
            {
                found.append("\(path): \(typeName)")
            }
            if value is (FeedError) -> Void || value is @Sendable (FeedError) -> Void || value is () throws -> Void
                || value is @Sendable () throws -> Void || value is () -> Void || value is @Sendable () -> Void
            {
                found.append("\(path): a callable \(typeName)")
            }
            let mirror = Mirror(reflecting: value)
            if mirror.displayStyle == .class {
                guard visited.insert(ObjectIdentifier(value as AnyObject)).inserted else { return }
            }
            var current: Mirror? = mirror
            while let level = current {
                for (index, child) in level.children.enumerated() {
                    visit(child.value, path + "." + (child.label ?? "\(index)"), depth: depth + 1)
                }
                current = level.superclassMirror
            }
        }
        visit(root, "changeFeed", depth: 0)
        return found
    }
}
