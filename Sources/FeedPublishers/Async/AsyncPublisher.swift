import Synchronization

/// An `AsyncSequence` of a publisher's values that, by default, loses none of them.
///
/// Each iterator subscribes once (when created) with unlimited demand and buffers values
/// sent while the loop body is busy, unlike Combine's `values`, which requests one value at
/// a time and drops the rest. The iterator takes everything buffered under one lock.
/// A failing publisher's failure is thrown (typed); `.finished` ends the loop. Cancelling
/// the consuming task, or dropping the iterator, cancels the subscription.
///
/// ```swift
/// for await value in subject.values { print(value) }
/// ```
public struct AsyncPublisher<Upstream: Publisher>: AsyncSequence where Upstream.Output: Sendable {
    /// The upstream's value type.
    public typealias Element = Upstream.Output

    /// The upstream's failure type; `Never` makes `for await` non-throwing.
    public typealias Failure = Upstream.Failure

    /// The publisher whose values are iterated.
    public let upstream: Upstream

    /// What happens to values that arrive faster than the loop takes them.
    public let bufferingPolicy: ValuesBufferingPolicy

    private let dropCounter = DropCounter()

    /// Creates the sequence; prefer `publisher.values` or `values(bufferingPolicy:)`.
    public init(upstream: Upstream, bufferingPolicy: ValuesBufferingPolicy = .unbounded) {
        if case .bounded(let limit, _) = bufferingPolicy {
            precondition(limit >= 0, "API Violation: a bounded buffer's limit must not be negative")
        }
        self.upstream = upstream
        self.bufferingPolicy = bufferingPolicy
    }

    /// How many values all iterators of this sequence have dropped under a bounded policy.
    public var droppedCount: Int {
        dropCounter.count.load(ordering: .relaxed)
    }

    /// Subscribes to the upstream and returns an iterator over its values.
    public func makeAsyncIterator() -> Iterator {
        let channel = ValuesChannel<Element, Failure>(policy: bufferingPolicy, sharedDrops: dropCounter)
        upstream.receive(subscriber: channel)
        return Iterator(channel: channel)
    }

    /// The iterator: takes buffered values in batches and suspends only when the buffer is empty.
    public struct Iterator: AsyncIteratorProtocol {
        /// The upstream's value type.
        public typealias Element = Upstream.Output

        /// The upstream's failure type.
        public typealias Failure = Upstream.Failure

        private let channel: ValuesChannel<Element, Failure>
        private let lifetime: ValuesLifetime
        private var batch: [Element] = []
        private var index = 0

        init(channel: ValuesChannel<Element, Failure>) {
            self.channel = channel
            lifetime = ValuesLifetime { channel.cancel() }
        }

        /// How many values this iterator has dropped under a bounded policy.
        public var droppedCount: Int {
            channel.droppedCount
        }

        /// Returns the next value, `nil` after `.finished` or cancellation; throws a failure.
        public mutating func next() async throws(Failure) -> Element? {
            while true {
                if index < batch.count {
                    defer { index += 1 }
                    return batch[index]
                }
                switch channel.take(into: &batch, index: &index) {
                case .values:
                    continue
                case .finished:
                    return nil
                case .failed(let error):
                    throw error
                case .empty:
                    await channel.waitForWork()
                }
            }
        }

        /// Returns the next value on the caller's isolation; see ``next()``.
        public mutating func next(isolation actor: isolated (any Actor)?) async throws(Failure) -> Element? {
            try await next()
        }
    }
}

extension AsyncPublisher: Sendable where Upstream: Sendable {}
