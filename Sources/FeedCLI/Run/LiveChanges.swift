internal import FeedSync

/// Follows other processes' commits: while running, they reach the service's bridge (and so every projection and
/// sink) in seq order, together with this process's own.
struct LiveChanges: Sendable {
    private let changeFeed: ChangeFeed

    /// Starts following `service`'s database.
    init(service: FeedService) throws(CLIError) {
        changeFeed = ChangeFeed(service: service)
        do {
            try changeFeed.start()
        } catch {
            throw CLIError(error)
        }
    }

    /// Stops following.
    func stop() {
        changeFeed.stop()
    }
}
