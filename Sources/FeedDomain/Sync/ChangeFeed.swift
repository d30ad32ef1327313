public import FeedPublishers
internal import FeedSQLite
internal import FeedStorage
internal import Foundation

/// Brings changes committed by other processes into this process: they reach ``FeedService/bridge``'s publishers
/// (and so every projection) in seq order, each once, together with this process's own.
///
/// A dedicated thread watches the database: it is woken by a file notification on the database's directory
/// (inotify; every WAL commit writes the `-wal` file) or, failing that, by a timer, and asks a dedicated read-only
/// connection for `PRAGMA data_version`, which changes when another connection commits. Only then does it read
/// the log from the last published seq. Nothing runs while nothing changes but one cheap pragma per timer tick.
///
/// Errors never stop the feed: a `SQLITE_BUSY`, a locked database or an I/O error is reported on ``errors`` and
/// retried with exponential backoff (up to ``Options/maximumBackoff``).
///
/// ```swift
/// let service = try FeedService(path: path)
/// let changeFeed = ChangeFeed(service: service)
/// try changeFeed.start()
/// let cancellable = service.bridge.likePublisher.sink { print($0) }   // likes from any process
/// ```
public final class ChangeFeed: Sendable {
    /// How the feed watches the database.
    public struct Options: Sendable {
        /// The longest time between two checks when no file notification arrives: the latency bound without
        /// inotify, and the idle tick with it.
        public var pollInterval: Duration = .milliseconds(250)
        /// Whether to use inotify file notifications (Linux) for immediate wake-ups.
        public var watchFiles = true
        /// The longest pause between retries after an error.
        public var maximumBackoff: Duration = .seconds(2)

        /// A failure to inject before each check, for tests of the retry path (BUSY is hard to provoke on demand
        /// in WAL mode, where readers are almost never blocked).
        var faultInjector: (@Sendable () throws -> Void)?

        /// The defaults: inotify plus a 250 ms timer, backoff up to 2 s.
        public init() {}
    }

    /// Whether the feed's thread is running.
    public var isRunning: Bool { state.withLock { $0.thread != nil } }

    /// Failures while watching or reading; the feed keeps going and retries.
    public var errors: AnyPublisher<FeedError, Never> { errorSubject.sealed() }

    private let service: FeedService
    private let options: Options
    private let errorSubject = PassthroughPublisher<FeedError, Never>()
    private let state = Locked<RunState>(RunState())

    private struct RunState {
        var thread: Thread?
        var watcher: FileChangeWatcher?
        var finished: DispatchSemaphore?
        var stopRequested = false
    }

    /// Creates a feed for `service`'s database. Call ``start()`` to begin.
    public init(service: FeedService, options: Options = Options()) {
        self.service = service
        self.options = options
    }

    deinit {
        stop()
    }

    /// Starts watching: publishes what was committed since the service's last published event, then follows.
    ///
    /// - Throws: ``FeedError`` when the database has no file (in-memory databases have no other processes) or the
    ///   watch connection cannot be opened.
    public func start() throws(FeedError) {
        guard let path = service.store.path else {
            throw FeedError.storage(.cannotOpen(path: ":memory:", reason: "an in-memory database has no other processes to follow"))
        }
        let connection: Connection
        do {
            connection = try Connection(location: .file(path), readOnly: true, configuration: service.store.database.configuration)
        } catch {
            throw FeedError.storage(StorageError(error, path: path))
        }
        let directory = (path as NSString).deletingLastPathComponent
        let watcher = FileChangeWatcher(directory: directory.isEmpty ? "." : directory, enabled: options.watchFiles)
        let box = ConnectionBox(connection)
        let sharedState = state
        let started = state.withLock { state -> Bool in
            guard state.thread == nil else { return false }
            state.stopRequested = false
            state.watcher = watcher
            let finished = DispatchSemaphore(value: 0)
            state.finished = finished
            // The thread holds what it needs, not the feed: a feed that is released stops its thread in deinit.
            let thread = Thread { [sharedState, service, options, errorSubject] in
                Self.run(
                    connection: box.take(), watcher: watcher, state: sharedState, service: service, options: options,
                    errors: errorSubject)
                finished.signal()
            }
            thread.name = "FeedSync.ChangeFeed"
            state.thread = thread
            thread.start()
            return true
        }
        if !started { connection.close() }
    }

    /// Stops watching and returns once the thread has ended its current step.
    public func stop() {
        let (watcher, finished) = state.withLock { state -> (FileChangeWatcher?, DispatchSemaphore?) in
            state.stopRequested = true
            defer { state.finished = nil }
            return (state.watcher, state.finished)
        }
        watcher?.wake()
        // Wait for the thread to finish its current step, bounded, without holding the lock.
        _ = finished?.wait(timeout: .now() + 5)
    }

    /// Checks the database now and publishes what other processes committed, on the calling thread.
    ///
    /// - Returns: how many events were published.
    @discardableResult
    public func checkNow() throws(FeedError) -> Int {
        try service.publishCommittedEvents()
    }

    // MARK: - The watching thread

    private static func run(
        connection: Connection, watcher: FileChangeWatcher, state: Locked<RunState>, service: FeedService,
        options: Options, errors errorSubject: PassthroughPublisher<FeedError, Never>
    ) {
        defer {
            connection.close()
            state.withLock { state in
                state.thread = nil
                state.watcher = nil
            }
        }
        var lastVersion: Int64?
        var backoff: Duration = .zero
        while !state.withLock({ $0.stopRequested }) {
            do {
                try options.faultInjector?()
                let version = try connection.dataVersion()
                if version != lastVersion {
                    try service.publishCommittedEvents()
                    lastVersion = version
                }
                backoff = .zero
            } catch {
                errorSubject.send(FeedError.wrap(error))
                backoff = min(max(backoff * 2, .milliseconds(10)), options.maximumBackoff)
            }
            if state.withLock({ $0.stopRequested }) { break }
            watcher.wait(timeout: backoff > .zero ? backoff : options.pollInterval)
        }
    }
}

/// Hands a connection opened on one thread to the watching thread exactly once.
///
/// `@unchecked Sendable`: `connection` is read and cleared only while `lock` is held; the opening thread stops
/// using the connection before the watching thread takes it.
private final class ConnectionBox: @unchecked Sendable {
    private let lock = NSLock()
    private var connection: Connection?

    init(_ connection: Connection) { self.connection = connection }

    func take() -> Connection {
        lock.lock()
        defer { lock.unlock() }
        guard let taken = connection else {
            preconditionFailure("API Violation: the change feed's connection was taken twice")
        }
        connection = nil
        return taken
    }
}
