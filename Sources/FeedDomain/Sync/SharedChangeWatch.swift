internal import FeedCore
internal import FeedPublishers
internal import Foundation

/// The watch of other processes' and machines' commits that a service's change streams and ``FeedService/run()``
/// share: a ``ChangeFeed`` started by the first user and asked to stop (without waiting) when the last one leaves. So
/// a stream includes every commit to the database by itself; a ``ChangeFeed`` the application runs as well does no
/// harm (the sequencer delivers each seq once).
final class SharedChangeWatch: Sendable {
    private struct State {
        var users = 0
        var feed: ChangeFeed?
        /// The feed's errors, watched for the one that stops it for good.
        var errors: AnyCancellable?
        var closed = false
    }

    private let state = Locked(State())

    /// Registers a user; the first (or the first after a start that failed) starts the watch.
    ///
    /// - Returns: why the watch could not start, or `nil` when it runs — or when the database has nothing to watch
    ///   (an in-memory database: no other process can write it) or the service is closed.
    @discardableResult
    func retain(service: FeedService) -> FeedError? {
        state.withLock { state -> FeedError? in
            state.users += 1
            guard state.feed == nil, !state.closed else { return nil }
            let backend = service.backend
            if !backend.traits.othersCanWrite { return nil }
            let feed = ChangeFeed(service: service)
            // A feed that stops by itself (its file was replaced) ends the service's runs with the reason.
            let errors = feed.errors.sink { [weak service] error in
                guard case .databaseReplaced = error else { return }
                service?.lifecycle.end(with: error)
            }
            do {
                // Starting only opens the watch and its thread; the feed retries by itself once running.
                try feed.start()
            } catch {
                errors.cancel()
                return FeedError.wrap(error)
            }
            state.feed = feed
            state.errors = errors
            return nil
        }
    }

    /// Unregisters a user; the last asks the watch to stop and returns at once.
    func release() {
        let (feed, errors) = state.withLock { state -> (ChangeFeed?, AnyCancellable?) in
            state.users -= 1
            guard state.users == 0 else { return (nil, nil) }
            defer { (state.feed, state.errors) = (nil, nil) }
            return (state.feed, state.errors)
        }
        errors?.cancel()
        feed?.requestStop()
    }

    /// Stops the watch for good (the service closes): returns once its thread has ended its current step (at most 5
    /// seconds; at once on that thread). Later users start none.
    func close() {
        let (feed, errors) = state.withLock { state -> (ChangeFeed?, AnyCancellable?) in
            state.closed = true
            defer { (state.feed, state.errors) = (nil, nil) }
            return (state.feed, state.errors)
        }
        errors?.cancel()
        feed?.stop()
    }

    /// Whether the watch runs (for tests).
    var isRunning: Bool {
        state.withLock { $0.feed?.isRunning ?? false }
    }
}
