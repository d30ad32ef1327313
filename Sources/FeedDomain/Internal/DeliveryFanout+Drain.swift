internal import FeedCore
internal import Foundation

extension DeliveryFanout {
    /// How reading a range from the log ended.
    private enum LoadOutcome {
        case done
        /// A read failed; everything up to `delivered` was delivered.
        case failed(delivered: Int64, FeedError)
    }

    /// Calls `subscriber` with everything its queue holds, in seq order, until the queue is empty; reads ranges kept
    /// without their events from the log. When a read fails, the rest goes back to the front of the queue and the
    /// drain starts again after a pause that doubles from 10 ms to 2 s. Runs on the subscriber's executor.
    func drain(_ subscriber: Subscriber) {
        let id = subscriber.id
        while true {
            let taken = withState { state -> ([Item], EventSequencer.LogSource?)? in
                guard var queue = state.queues[id] else { return nil }  // nobody listens any more
                defer { state.queues[id] = queue }
                guard !queue.items.isEmpty else {
                    queue.isDraining = false
                    queue.fallingBehind = false
                    queue.delivered = max(queue.delivered, queue.handed)
                    condition.broadcast()
                    return nil
                }
                defer {
                    queue.items = []
                    queue.buffered = 0
                }
                return (queue.items, source)
            }
            guard let (items, source) = taken else { return }
            for (index, item) in items.enumerated() {
                switch item {
                case .events(let events, let through):
                    for event in events { subscriber.deliver(Key(), event) }
                    record(id, deliveredThrough: through)
                case .rewrite(let rewrite):
                    subscriber.rewritten?(Key(), rewrite)
                    withState { state in
                        guard var queue = state.queues[id] else { return }
                        queue.delivered = rewrite.head
                        queue.hasRewrite = queue.items.contains { if case .rewrite = $0 { true } else { false } }
                        state.queues[id] = queue
                        condition.broadcast()
                    }
                case .range(let after, let through):
                    guard case .failed(let delivered, let error) = load(after: after, through: through, from: source, to: subscriber)
                    else {
                        record(id, deliveredThrough: through)
                        continue
                    }
                    let rest = [Item.range(after: delivered, through: through)] + items[(index + 1)...]
                    let delay = withState { state -> Duration? in
                        guard var queue = state.queues[id] else { return nil }
                        defer { state.queues[id] = queue }
                        queue.items = rest + queue.items
                        queue.buffered = queue.items.reduce(0) { count, item in
                            if case .events(let events, _) = item { count + events.count } else { count }
                        }
                        queue.retryDelay = min(max(queue.retryDelay * 2, .milliseconds(10)), .seconds(2))
                        return queue.retryDelay
                    }
                    guard let delay else { return }
                    source?.log(
                        .deliveryReadFailed, .warning, "delivery could not read events from the log and retries: \(error)",
                        ["error": error.description, "retryMilliseconds": "\(FeedService.milliseconds(delay))"])
                    // `isDraining` stays set: this retry is the drain that hand-offs would otherwise schedule.
                    subscriber.queue.asyncAfter(deadline: .now() + .milliseconds(Int(FeedService.milliseconds(delay)))) {
                        self.drain(subscriber)
                    }
                    return
                }
            }
        }
    }

    /// Records that `id`'s callbacks returned for every seq up to `seq`, and wakes the waiters.
    private func record(_ id: Int, deliveredThrough seq: Int64) {
        withState { state in
            guard var queue = state.queues[id] else { return }
            queue.delivered = max(queue.delivered, seq)
            state.queues[id] = queue
            condition.broadcast()
        }
    }

    /// Delivers the log's events in `(after, through]` to `subscriber`, a page at a time, recording progress after
    /// each page. Without a log (the service closed) the range is not delivered.
    private func load(
        after: Int64, through: Int64, from source: EventSequencer.LogSource?, to subscriber: Subscriber
    ) -> LoadOutcome {
        guard let source else { return .done }
        var cursor = after
        while cursor < through {
            let page: [EventRecord]
            do {
                let limit = Int(min(Int64(EventSequencer.logPageSize), through - cursor))
                guard let read = try source.read(cursor, limit) else { return .done }
                page = read
            } catch {
                return .failed(delivered: cursor, FeedError.wrap(error))
            }
            let events = page.prefix { $0.seq <= through }
            let first = events.first?.seq ?? through + 1
            if first > cursor + 1 {
                source.log(
                    .deliveryMissedPruned, .error,
                    "events \(cursor + 1) through \(first - 1) were pruned from the log before delivery read them; a subscriber does not get them",
                    ["from": "\(cursor + 1)", "through": "\(first - 1)"])
            }
            guard let last = events.last?.seq else { break }
            for event in events { subscriber.deliver(Key(), event) }
            withState { state in
                guard var queue = state.queues[subscriber.id] else { return }
                queue.delivered = max(queue.delivered, last)
                queue.retryDelay = .zero
                state.queues[subscriber.id] = queue
                condition.broadcast()
            }
            cursor = events.count < page.count ? through : last
        }
        return .done
    }
}
