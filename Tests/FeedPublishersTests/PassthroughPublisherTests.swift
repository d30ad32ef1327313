import FeedPublishers
import Testing

@Suite struct PassthroughPublisherTests {
    typealias Tracker = TrackingSubscriber<Int, TestError>

    @Test func dropsValueForSubscriberWithoutDemand() {
        let sut = PassthroughPublisher<Int, TestError>()
        let tracker = Tracker()
        sut.receive(subscriber: tracker)
        sut.send(1)
        tracker.request(.max(1))
        #expect(tracker.values.isEmpty, "a passthrough publisher stores nothing")
        sut.send(2)
        sut.send(3)
        #expect(tracker.values == [2])
    }

    @Test func neverDeliversMoreThanRequested() {
        let sut = PassthroughPublisher<Int, TestError>()
        let tracker = Tracker(initialDemand: .max(2))
        sut.receive(subscriber: tracker)
        for value in 1...5 { sut.send(value) }
        #expect(tracker.values == [1, 2])
        tracker.request(.max(1))
        sut.send(6)
        #expect(tracker.values == [1, 2, 6])
    }

    @Test func addsDemandReturnedFromReceive() {
        let sut = PassthroughPublisher<Int, TestError>()
        let tracker = Tracker(initialDemand: .max(1)) { $0 < 3 ? .max(1) : .none }
        sut.receive(subscriber: tracker)
        for value in 1...5 { sut.send(value) }
        #expect(tracker.values == [1, 2, 3])
    }

    @Test func deliversBeforeSendReturnsInSendOrder() {
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        let token = sut.sink { received.append($0) }
        for value in 0..<10_000 {
            sut.send(value)
            if value % 1_000 == 0 { #expect(received.count == value + 1) }
        }
        #expect(received.values == Array(0..<10_000))
        token.cancel()
    }

    @Test func completionReachesCurrentSubscribersOnce() {
        let sut = PassthroughPublisher<Int, TestError>()
        let first = Tracker(initialDemand: .unlimited)
        let second = Tracker(initialDemand: .none)
        sut.receive(subscriber: first)
        sut.receive(subscriber: second)
        sut.send(1)
        sut.send(completion: .failure(TestError()))
        sut.send(completion: .finished)
        sut.send(2)
        #expect(first.history == [.subscribed, .value(1), .completion(.failure(TestError()))])
        #expect(second.history == [.subscribed, .completion(.failure(TestError()))])
    }

    @Test func lateSubscriberGetsCompletionAtOnceAndNothingElse() {
        let sut = PassthroughPublisher<Int, TestError>()
        sut.send(completion: .finished)
        let late = Tracker(initialDemand: .unlimited)
        sut.receive(subscriber: late)
        sut.send(1)
        late.request(.max(3))
        late.cancel()
        #expect(late.history == [.subscribed, .completion(.finished)])
    }

    @Test func requestNoneIsANoOp() {
        let sut = PassthroughPublisher<Int, TestError>()
        let tracker = Tracker()
        sut.receive(subscriber: tracker)
        tracker.request(.none)
        sut.send(1)
        #expect(tracker.values.isEmpty)
    }

    @Test func servesSubscribersInSubscriptionOrder() {
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<String>()
        let tokens = ["a", "b", "c"].map { name in sut.sink { received.append("\(name)\($0)") } }
        sut.send(1)
        #expect(received.values == ["a1", "b1", "c1"])
        withExtendedLifetime(tokens) {}
    }
}
