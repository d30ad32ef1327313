internal import FeedCore
internal import Foundation

/// The watch of other processes' and machines' commits that a service's change streams share: a ``ChangeFeed``
/// started by the first ``FeedService/changes(after:maximumBatch:)`` iteration and asked to stop (without waiting)
/// when the last one ends. So a stream includes every commit to the database by itself; a ``ChangeFeed`` the
/// application runs as well does no harm (the sequencer delivers each seq once).
final class SharedChangeWatch: Sendable {
    private struct State {
        var users = 0
        var feed: ChangeFeed?
    }

    private let state = Locked(State())

    /// Registers a user; the first starts the watch. A database with nothing to watch (in memory) has none.
    func retain(service: FeedService) {
        state.withLock { state in
            state.users += 1
            guard state.users == 1 else { return }
            let feed = ChangeFeed(service: service)
            // Starting only opens the watch and its thread; the feed retries by itself once running.
            state.feed = (try? feed.start()).map { feed }
        }
    }

    /// Unregisters a user; the last asks the watch to stop and returns at once.
    func release() {
        let feed = state.withLock { state -> ChangeFeed? in
            state.users -= 1
            guard state.users == 0 else { return nil }
            defer { state.feed = nil }
            return state.feed
        }
        feed?.requestStop()
    }

    /// Whether the watch runs (for tests).
    var isRunning: Bool {
        state.withLock { $0.feed?.isRunning ?? false }
    }
}
