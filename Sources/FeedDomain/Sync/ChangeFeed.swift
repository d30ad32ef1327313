public import FeedPublishers
internal import FeedCore
internal import Foundation

/// Brings changes committed by other processes (on PostgreSQL, also other machines) into this process: they reach ``FeedService/bridge``'s publishers
/// (and so every projection) in seq order, each once, together with this process's own.
///
/// A dedicated thread watches the database through the backend's change watch, and reads the log from the last
/// published seq only when the watch says something may have changed:
///
/// - **SQLite**: the thread is woken by a file notification on the database's directory (inotify; every WAL commit
///   writes the `-wal` file) or, failing that, by a timer, and asks a dedicated read-only connection for
///   `PRAGMA data_version`, which changes when another connection commits. Nothing runs while nothing changes but
///   one cheap pragma per timer tick. A notification can come before the commit it announces is visible: the
///   writer's last `write(2)` to `-wal` raises it, and only afterwards does the writer publish the commit in the
///   `-shm` index (through `mmap`, which raises no notification). So after every notification the feed checks again
///   on a short schedule (0.1 ms rising to 8 ms, about 15 ms in all) before it goes back to the long timer.
/// - **PostgreSQL**: the watch's own connection runs `LISTEN feedsync_events`; writing processes send
///   `pg_notify` after their commits (from a notifier thread, never inside a writer's transaction). The thread
///   sleeps on the connection's socket until a notification beyond the last head it read, or the timer; every check
///   reads `event_log_head`, which is also the connection's ping (a short deadline), so a lost notification costs at
///   most one poll interval.
///
/// Errors never stop the feed: a `SQLITE_BUSY`, a locked database or an I/O error is reported on ``errors`` and
/// retried with exponential backoff (up to ``Options/maximumBackoff``), and a pass that failed anywhere makes the next
/// one read the log whatever the watch says, so a change seen before the failure is published without waiting for a
/// later commit. On PostgreSQL the ping's deadline means a connection whose server vanished (a partition) is
/// replaced within seconds (`Docs/Reliability.md`). The one exception is a database file that
/// was deleted or replaced (its device or inode changed): the feed reports ``FeedError/databaseReplaced(path:)``
/// once on ``errors`` and stops, since it would otherwise keep reading the old file forever.
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
        /// The longest time between two checks when no file notification (SQLite) or `NOTIFY` (PostgreSQL) arrives:
        /// the latency bound without them, and the idle tick with them.
        public var pollInterval: Duration = .milliseconds(250)
        /// Whether to use inotify file notifications (Linux) for immediate wake-ups on SQLite. PostgreSQL's watch
        /// always listens for `NOTIFY`.
        public var watchFiles = true
        /// The longest pause between retries after an error.
        public var maximumBackoff: Duration = .seconds(2)

        /// A failure to inject before each check, for tests of the retry path (BUSY is hard to provoke on demand
        /// in WAL mode, where readers are almost never blocked).
        var faultInjector: (@Sendable () throws -> Void)? {
            get {
                guard let inject = injectFault else { return nil }
                return { @Sendable () throws in try inject(FaultPoint(stage: .beforeCheck)) }
            }
            set {
                guard let inject = newValue else { return injectFault = nil }
                injectFault = { @Sendable (point: FaultPoint) throws in
                    if point.stage == .beforeCheck { try inject() }
                }
            }
        }

        /// A failure to inject at any ``Stage`` of a pass, for tests of what the feed does when a step between "the
        /// database changed" and "its events were published" fails.
        var stageFaultInjector: (@Sendable (Stage) throws -> Void)? {
            get {
                guard let inject = injectFault else { return nil }
                return { @Sendable (stage: Stage) throws in try inject(FaultPoint(stage: stage)) }
            }
            set {
                guard let inject = newValue else { return injectFault = nil }
                injectFault = { @Sendable (point: FaultPoint) throws in try inject(point.stage) }
            }
        }

        /// The most events one read of the log publishes (more are read in further batches).
        var publishBatchSize = 10_000

        /// The stored form of the injectors: its parameter is a private type, so code outside this file that
        /// reaches it by reflection cannot cast it to a function type it could call.
        fileprivate var injectFault: (@Sendable (FaultPoint) throws -> Void)?

        /// The defaults: inotify (SQLite) or `LISTEN` (PostgreSQL) plus a 250 ms timer, backoff up to 2 s.
        public init() {}
    }

    /// The steps of one pass of the watching thread, where tests inject failures.
    enum Stage: Sendable, Hashable {
        /// Before the watch is asked whether the database changed.
        case beforeCheck
        /// After the watch said the database changed (or a pass failed), before the log is read.
        case beforePublish
        /// Before each read of a batch of the log, counted from 0 in a pass.
        case beforeBatch(Int)
    }

    /// Whether the feed follows the database: from ``start()`` until ``stop()``, until the database file was
    /// replaced, or until the service was closed (``FeedService/close()``).
    public var isRunning: Bool { state.withLock { $0.current != nil } }

    /// Failures while watching or reading; the feed keeps going and retries, except after
    /// ``FeedError/databaseReplaced(path:)``, its last report.
    public var errors: AnyPublisher<FeedError, Never> { errorChannel.publisher }

    private let service: FeedService
    private let options: Options
    private let errorChannel = SealedSubject<FeedError>()
    private let state = Locked<RunState>(RunState())

    /// The feed's runs: at most one current, plus those stopped whose thread has not ended yet.
    private struct RunState {
        var current: Run?
        var stopping: [Run] = []
    }

    /// Creates a feed for `service`'s database. Call ``start()`` to begin.
    public init(service: FeedService, options: Options = Options()) {
        self.service = service
        self.options = options
    }

    deinit {
        // Never waits: the thread holds what it needs, not the feed, and ends after its current step.
        requestStop()
    }

    /// Starts watching: publishes what was committed since the service's last published event, then follows.
    /// Does nothing while the feed is running.
    ///
    /// - Throws: ``FeedError`` when the database has no file (in-memory databases have no other processes) or the
    ///   watch connection cannot be opened.
    public func start() throws(FeedError) {
        if isRunning { return }
        let watch: any FeedChangeWatch
        do {
            watch = try service.backend.makeChangeWatch(watchFiles: options.watchFiles)
        } catch {
            throw FeedError.wrap(error)
        }
        let run = Run(watch: watch)
        let started = state.withLock { state -> Bool in
            guard state.current == nil else { return false }
            state.current = run
            // Under the lock: a stop() that takes this run waits for its thread.
            run.finished.enter()
            return true
        }
        guard started else {
            watch.close()
            return
        }
        // The thread holds what it needs, not the feed: a feed that is released stops its thread in deinit.
        let context = RunContext(service: service, options: options, errors: errorChannel, state: state, run: run)
        let thread = Thread {
            // Named from inside: on Linux, a name set before `start()` does not reach the thread.
            Thread.current.name = "FeedSync.ChangeFeed"
            run.markCurrentThread()
            Self.follow(context: context)
            context.state.withLock { state in
                if state.current === run { state.current = nil }
                state.stopping.removeAll { $0 === run }
            }
            run.finished.leave()
        }
        thread.start()
    }

    /// Stops watching and returns once the thread has ended its current step (waiting at most 5 seconds).
    ///
    /// Called on the feed's own thread — from an ``errors`` sink — it returns at once, and the thread ends after its
    /// current step.
    public func stop() {
        _ = Self.waitForThreads(of: stopRuns(), timeout: .seconds(5))
    }

    /// Asks the thread to end after its current step and returns at once.
    func requestStop() {
        stopRuns()
    }

    /// Asks every run's thread to end after its current step; returns the runs whose threads may still run.
    @discardableResult
    private func stopRuns() -> [Run] {
        let runs = state.withLock { state -> [Run] in
            if let current = state.current {
                state.stopping.append(current)
                state.current = nil
            }
            return state.stopping
        }
        for run in runs { run.requestStop() }
        return runs
    }

    /// Waits until the threads of stopped runs have ended (except the calling thread, when it is one of them); for
    /// tests of ``stop()`` called on the feed's own thread.
    ///
    /// - Returns: whether they all ended within `timeout`.
    func waitUntilStopped(timeout: Duration) -> Bool {
        Self.waitForThreads(of: state.withLock { $0.stopping }, timeout: timeout)
    }

    private static func waitForThreads(of runs: [Run], timeout: Duration) -> Bool {
        let (seconds, attoseconds) = timeout.components
        let deadline = DispatchTime.now() + .nanoseconds(Int(clamping: seconds * 1_000_000_000 + attoseconds / 1_000_000_000))
        return runs.allSatisfy { $0.isCurrentThread || $0.finished.wait(timeout: deadline) == .success }
    }

    /// Checks the database now and hands what other processes committed to the bridge's delivery executor.
    ///
    /// - Returns: how many events were published.
    @discardableResult
    public func checkNow() throws(FeedError) -> Int {
        try service.publishCommittedEvents()
    }

    // MARK: - The watching thread

    /// Everything the watching thread needs, without the feed itself.
    private struct RunContext: Sendable {
        let service: FeedService
        let options: Options
        let errors: SealedSubject<FeedError>
        let state: Locked<RunState>
        let run: Run
    }

    /// The watching thread's loop.
    ///
    /// A change signal is used up only once the events it announced were published: the watch's answer ("changed
    /// since the last check") moves into `mustPublish`, which only a pass that published everything clears. A pass
    /// that failed anywhere — the check, the read of the log, one of its batches — leaves it set, so the next pass
    /// reads the log whatever the watch says then (the watch has already recorded the new head and would say "no
    /// change").
    private static func follow(context: RunContext) {
        let run = context.run
        defer { run.watch.close() }
        let delays = run.watch.recheckDelays
        let inject = context.options.injectFault
        var backoff: Duration = .zero
        // The next re-check after a change notification, as an index into `delays`; `delays.count` when none is due.
        var recheck = delays.count
        // The first pass publishes what was committed since the service's last published event.
        var mustPublish = true
        // Failed passes since the last one that succeeded: the first is logged, and so is the recovery.
        var failures = 0
        let service = context.service
        // A closed service's backend refuses every read: the feed ends with it.
        while !run.isStopRequested && !service.isClosed {
            do {
                try inject?(FaultPoint(stage: .beforeCheck))
                if try run.watch.poll() { mustPublish = true }
                if mustPublish {
                    try inject?(FaultPoint(stage: .beforePublish))
                    _ = try context.service.publishCommittedEvents(batchSize: context.options.publishBatchSize) { batch in
                        try inject?(FaultPoint(stage: .beforeBatch(batch)))
                    }
                    mustPublish = false
                }
                backoff = .zero
                if failures > 0 {
                    service.log(
                        .changeWatchRecovered, .info, "the change watch works again after \(failures) failed passes",
                        ["failures": "\(failures)"])
                    failures = 0
                }
            } catch {
                mustPublish = true
                let error = FeedError.wrap(error)
                if case .databaseReplaced = error {
                    service.log(
                        .changeWatchStopped, .error, "the change watch stopped: \(error)", ["error": error.description])
                    // Deleted, or replaced by another file: the watch would keep reading the old one. The feed stops
                    // (no longer running when the error arrives), then reports it.
                    context.state.withLock { state in
                        guard state.current === run else { return }
                        state.current = nil
                        state.stopping.append(run)
                    }
                    context.errors.send(error)
                    return
                }
                if run.isStopRequested || service.isClosed { return }
                context.errors.send(error)
                backoff = min(max(backoff * 2, .milliseconds(10)), context.options.maximumBackoff)
                if failures == 0 {
                    service.log(
                        .changeWatchFailed, .warning, "the change watch failed and retries: \(error)",
                        ["error": error.description, "retryMilliseconds": "\(FeedService.milliseconds(backoff))"])
                }
                failures += 1
            }
            if run.isStopRequested { return }
            let timeout =
                if backoff > .zero { backoff } else if recheck < delays.count { delays[recheck] } else { context.options.pollInterval }
            switch run.watch.wait(timeout: timeout) {
            case .changed: recheck = 0
            case .timedOut: recheck = min(recheck + 1, delays.count)
            case .woken: break
            }
        }
    }
}

/// A point where ``ChangeFeed/Options`` may inject a fault; a private type, so that the stored injector cannot be
/// called by code that reaches it through reflection.
private struct FaultPoint {
    let stage: ChangeFeed.Stage
}

/// One run of the watching thread: its stop flag, its wake-up source and its end.
private final class Run: Sendable {
    let watch: any FeedChangeWatch
    /// Entered when the run becomes current, left when its thread has ended.
    let finished = DispatchGroup()
    private let flags = Locked<Flags>(Flags())

    private struct Flags {
        var stopRequested = false
        var thread: pthread_t?
    }

    init(watch: any FeedChangeWatch) {
        self.watch = watch
    }

    var isStopRequested: Bool { flags.withLock { $0.stopRequested } }

    /// Whether the caller runs on this run's thread.
    var isCurrentThread: Bool {
        guard let thread = flags.withLock({ $0.thread }) else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    /// Records the calling thread as this run's; called first thing on the thread.
    func markCurrentThread() {
        let current = pthread_self()
        flags.withLock { $0.thread = current }
    }

    /// Asks the thread to end after its current step and wakes it if it waits.
    func requestStop() {
        flags.withLock { $0.stopRequested = true }
        watch.wake()
    }
}
