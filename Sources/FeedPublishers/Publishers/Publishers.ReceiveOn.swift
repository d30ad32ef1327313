import Synchronization

extension Publishers {
    /// A publisher that delivers the upstream's values, completion and subscription on a scheduler.
    ///
    /// It requests unlimited values from the upstream at once (so nothing sent right after
    /// subscribing is lost), buffers them in order, and drains the buffer on the scheduler
    /// as far as the downstream's demand allows, several values per scheduled action.
    public struct ReceiveOn<Upstream: Publisher>: Publisher where Upstream.Output: Sendable {
        /// The upstream's value type.
        public typealias Output = Upstream.Output

        /// The upstream's failure type.
        public typealias Failure = Upstream.Failure

        /// The publisher whose events are moved.
        public let upstream: Upstream

        private let enqueue: @Sendable (@escaping @Sendable () -> Void) -> Void

        /// Creates the operator; prefer `upstream.receive(on:)`.
        public init(upstream: Upstream, scheduler: some Scheduler) {
            self.upstream = upstream
            enqueue = scheduler.makeEnqueuer()
        }

        /// Subscribes to the upstream with a buffering subscriber that drains on the scheduler.
        public func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
            upstream.receive(subscriber: ReceiveOnInner(downstream: subscriber, enqueue: enqueue))
        }
    }
}

extension Publishers.ReceiveOn: Sendable where Upstream: Sendable {}

extension Publisher where Output: Sendable {
    /// Delivers values, completion and the subscription on `scheduler` instead of the sender's thread.
    ///
    /// ```swift
    /// bridge.likePublisher
    ///     .receive(on: DispatchQueue.main)
    ///     .sink { update($0) }
    /// ```
    public func receive(on scheduler: some Scheduler) -> Publishers.ReceiveOn<Self> {
        Publishers.ReceiveOn(upstream: self, scheduler: scheduler)
    }
}
