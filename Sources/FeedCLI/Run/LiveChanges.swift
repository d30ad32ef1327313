internal import FeedSync
internal import Synchronization

/// Follows other processes' commits: while running, they reach the service's bridge (and so every projection and
/// sink) in seq order, together with this process's own.
///
/// Transient errors (a locked database) are retried by the ``ChangeFeed`` and not shown. When the database file is
/// deleted or replaced (exit status 74), or the log was rewritten under the follower (a failover to a standby that
/// lacked the last commits, or a restored backup: exit status 66), following it is pointless: ``failure`` holds the
/// error and `onFailure` runs once, on the feed's thread, before the feed publishes anything more, so that the
/// command can end.
struct LiveChanges: Sendable {
    private let changeFeed: ChangeFeed
    private let errors: AnyCancellable
    private let recorded: Failure

    /// Starts following `service`'s database; `onFailure` is called when following cannot go on.
    init(service: FeedService, onFailure: @escaping @Sendable () -> Void) throws(CLIError) {
        changeFeed = ChangeFeed(service: service)
        let recorded = Failure()
        self.recorded = recorded
        errors = changeFeed.errors.sink { error in
            switch error {
            case .databaseReplaced, .historyRewritten: break
            default: return
            }
            if recorded.record(CLIError(error)) { onFailure() }
        }
        do {
            try changeFeed.start()
        } catch {
            errors.cancel()
            throw CLIError(error)
        }
    }

    /// Why following stopped by itself, if it did.
    var failure: CLIError? { recorded.value }

    /// Stops following.
    func stop() {
        changeFeed.stop()
        errors.cancel()
    }

    /// The first fatal error, set once from the feed's thread and read by the command.
    private final class Failure: Sendable {
        private let stored = Mutex<CLIError?>(nil)

        /// Keeps `error` unless one is kept already; returns whether it was kept.
        func record(_ error: CLIError) -> Bool {
            stored.withLock { stored in
                guard stored == nil else { return false }
                stored = error
                return true
            }
        }

        var value: CLIError? { stored.withLock { $0 } }
    }
}
