import FeedPublishers
import Synchronization
import Testing

@Suite struct ValuesTests {
    /// Sends -1 (current value), lets the loop body block on it, sends 0..<1000 meanwhile, then releases the body.
    private func burstWhileBodyIsBusy(
        _ policy: ValuesBufferingPolicy
    ) async -> (received: [Int], dropped: Int, iteratorDropped: Int) {
        let sut = CurrentValuePublisher<Int, Never>(-1)
        let sequence = sut.values(bufferingPolicy: policy)
        let bodyBusy = AsyncGate()
        let burstSent = AsyncGate()
        let consumer = Task.detached { () -> ([Int], Int) in
            var received: [Int] = []
            var iterator = sequence.makeAsyncIterator()
            while let value = await iterator.next() {
                if value == -1 {
                    bodyBusy.open()
                    await burstSent.wait()  // the loop body is busy while the burst is sent
                    continue
                }
                received.append(value)
                if value == 999 { break }
            }
            return (received, iterator.droppedCount)
        }
        await bodyBusy.wait()
        for value in 0..<1_000 { sut.send(value) }
        burstSent.open()
        let (received, iteratorDropped) = await consumer.value
        return (received, sequence.droppedCount, iteratorDropped)
    }

    @Test func defaultKeepsEveryValueOfABurstInOrder() async {
        let result = await burstWhileBodyIsBusy(.unbounded)
        #expect(result.received == Array(0..<1_000))
        #expect(result.dropped == 0)
    }

    @Test func forAwaitLoopReceivesWholeBurst() async {
        let sut = CurrentValuePublisher<Int, Never>(-1)
        let bodyBusy = AsyncGate()
        let burstSent = AsyncGate()
        let values = sut.values
        let consumer = Task.detached { () -> [Int] in
            var received: [Int] = []
            for await value in values {
                if value == -1 {
                    bodyBusy.open()
                    await burstSent.wait()  // the loop body is busy while the burst is sent
                    continue
                }
                received.append(value)
                if value == 999 { break }
            }
            return received
        }
        await bodyBusy.wait()
        for value in 0..<1_000 { sut.send(value) }
        burstSent.open()
        #expect(await consumer.value == Array(0..<1_000))
    }

    @Test func boundedDropOldestKeepsNewestAndCountsDrops() async {
        let result = await burstWhileBodyIsBusy(.bounded(100, whenFull: .dropOldest))
        #expect(result.received == Array(900..<1_000))
        #expect(result.dropped == 900)
        #expect(result.iteratorDropped == 900)
    }

    @Test func boundedDropNewestKeepsOldestAndCountsDrops() async {
        let sut = CurrentValuePublisher<Int, Never>(-1)
        let sequence = sut.values(bufferingPolicy: .bounded(100, whenFull: .dropNewest))
        var iterator = sequence.makeAsyncIterator()
        #expect(await iterator.next() == -1)
        for value in 0..<1_000 { sut.send(value) }
        sut.send(completion: .finished)
        var received: [Int] = []
        while let value = await iterator.next() { received.append(value) }
        #expect(received == Array(0..<100))
        #expect(sequence.droppedCount == 900)
        #expect(iterator.droppedCount == 900)
    }

    @Test func finishedPublisherEndsTheLoop() async {
        let sut = PassthroughPublisher<Int, Never>()
        let sequence = sut.values
        var iterator = sequence.makeAsyncIterator()
        sut.send(1)
        sut.send(2)
        sut.send(completion: .finished)
        #expect(await iterator.next() == 1)
        #expect(await iterator.next() == 2)
        #expect(await iterator.next() == nil)
        #expect(await iterator.next() == nil)
    }

    @Test func failureIsThrownAfterBufferedValues() async throws {
        let sut = PassthroughPublisher<Int, TestError>()
        var iterator = sut.values.makeAsyncIterator()
        sut.send(1)
        sut.send(completion: .failure(TestError(code: 4)))
        #expect(try await iterator.next() == 1)
        do {
            _ = try await iterator.next()
            Issue.record("expected the failure to be thrown")
        } catch {
            #expect(error == TestError(code: 4))
        }
    }

    @Test func cancellingTheConsumingTaskCancelsTheSubscription() async {
        let sut = PassthroughPublisher<Int, Never>()
        let probe = CancelProbe(upstream: sut)
        let started = AsyncGate()
        let consumer = Task.detached { () -> Int in
            var count = 0
            var iterator = probe.values.makeAsyncIterator()
            started.open()
            while await iterator.next() != nil { count += 1 }
            return count
        }
        await started.wait()
        consumer.cancel()
        _ = await consumer.value
        #expect(probe.cancelled)
    }

    @Test func breakingOutOfTheLoopCancelsTheSubscription() async {
        let sut = CurrentValuePublisher<Int, Never>(0)
        let probe = CancelProbe(upstream: sut)
        for await value in probe.values where value == 0 { break }
        #expect(probe.cancelled)
    }
}

/// Wraps a publisher and records whether a subscription to it was cancelled.
final class CancelProbe<Upstream: Publisher & Sendable>: Publisher, Sendable where Upstream.Output: Sendable {
    typealias Output = Upstream.Output
    typealias Failure = Upstream.Failure

    let upstream: Upstream
    private let flag = Atomic<Bool>(false)

    init(upstream: Upstream) {
        self.upstream = upstream
    }

    var cancelled: Bool { flag.load(ordering: .sequentiallyConsistent) }

    func receive<S: Subscriber>(subscriber: S) where S.Input == Output, S.Failure == Failure {
        upstream.receive(subscriber: Forwarder(downstream: subscriber, probe: self))
    }

    func markCancelled() {
        flag.store(true, ordering: .sequentiallyConsistent)
    }

    struct Forwarder<Downstream: Subscriber>: Subscriber where Downstream.Input == Output, Downstream.Failure == Failure {
        let downstream: Downstream
        let probe: CancelProbe

        func receive(subscription: any Subscription) {
            downstream.receive(subscription: Recording(upstream: subscription, probe: probe))
        }

        func receive(_ input: Output) -> Subscribers.Demand { downstream.receive(input) }

        func receive(completion: Subscribers.Completion<Failure>) { downstream.receive(completion: completion) }
    }

    struct Recording: Subscription {
        let upstream: any Subscription
        let probe: CancelProbe

        func request(_ demand: Subscribers.Demand) { upstream.request(demand) }

        func cancel() {
            probe.markCancelled()
            upstream.cancel()
        }
    }
}
