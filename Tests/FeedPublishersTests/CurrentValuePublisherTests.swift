import FeedPublishers
import Testing

@Suite struct CurrentValuePublisherTests {
    typealias Tracker = TrackingSubscriber<Int, TestError>

    @Test func newSubscriberGetsValueCurrentAtItsFirstRequest() {
        let sut = CurrentValuePublisher<Int, TestError>(1)
        let tracker = Tracker()
        sut.receive(subscriber: tracker)
        #expect(tracker.values.isEmpty, "nothing before demand")
        sut.send(2)
        #expect(tracker.values.isEmpty)
        tracker.request(.max(1))
        #expect(tracker.values == [2], "delivered inside request, the value current at that moment")
    }

    @Test func sinkGetsCurrentValueFirst() {
        let sut = CurrentValuePublisher<Int, Never>(7)
        let received = Received<Int>()
        let token = sut.sink { received.append($0) }
        sut.send(8)
        #expect(received.values == [7, 8])
        #expect(sut.value == 8)
        token.cancel()
    }

    @Test func behindSubscriberGetsOnlyLatestValueOnNextRequest() {
        let sut = CurrentValuePublisher<Int, TestError>(0)
        let tracker = Tracker(initialDemand: .max(1))
        sut.receive(subscriber: tracker)
        #expect(tracker.values == [0])
        sut.send(1)
        sut.send(2)
        sut.send(3)
        tracker.request(.max(5))
        #expect(tracker.values == [0, 3])
        sut.send(4)
        #expect(tracker.values == [0, 3, 4])
    }

    @Test func requestDeliversNothingWhenNothingWasRefused() {
        let sut = CurrentValuePublisher<Int, TestError>(0)
        let tracker = Tracker(initialDemand: .max(1))
        sut.receive(subscriber: tracker)
        tracker.request(.max(1))
        #expect(tracker.values == [0])
        sut.send(5)
        #expect(tracker.values == [0, 5])
    }

    @Test func extraDemandFromReceiveDoesNotCatchUp() {
        let sut = CurrentValuePublisher<Int, TestError>(0)
        let tracker = Tracker(initialDemand: .max(1)) { value in
            if value == 0 {
                sut.send(1)  // refused: the demand was taken for 0, so the subscriber falls behind
                return .max(1)
            }
            return .none
        }
        sut.receive(subscriber: tracker)
        #expect(tracker.values == [0])
        sut.send(2)
        #expect(tracker.values == [0, 2])
    }

    @Test func lateSubscriberGetsOnlyCompletion() {
        let sut = CurrentValuePublisher<Int, TestError>(1)
        sut.send(completion: .finished)
        let late = Tracker(initialDemand: .unlimited)
        sut.receive(subscriber: late)
        #expect(late.history == [.subscribed, .completion(.finished)])
    }

    @Test func sendAfterCompletionIsIgnoredAndValueUnchanged() {
        let sut = CurrentValuePublisher<Int, TestError>(1)
        let tracker = Tracker(initialDemand: .unlimited)
        sut.receive(subscriber: tracker)
        sut.send(2)
        sut.send(completion: .failure(TestError(code: 9)))
        sut.send(3)
        sut.send(completion: .finished)
        #expect(sut.value == 2)
        #expect(tracker.history == [.subscribed, .value(1), .value(2), .completion(.failure(TestError(code: 9)))])
    }

    @Test func isUsableWhereReadOnlyTypeIsExpected() {
        let sut = CurrentValuePublisher<Int, Never>(3)
        let readOnly: ReadOnlyCurrentValuePublisher<Int, Never> = sut
        let received = Received<Int>()
        let token = readOnly.sink { received.append($0) }
        sut.send(4)
        #expect(readOnly.value == 4)
        #expect(received.values == [3, 4])
        token.cancel()
    }
}
