import FeedPublishers
import Synchronization
import Testing

@Suite struct CancellationTests {
    @Test func noValueReachesSubscriberAfterCancel() {
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        let token = sut.sink { received.append($0) }
        sut.send(1)
        token.cancel()
        sut.send(2)
        #expect(received.values == [1])
    }

    @Test func cancelRacingWithSendOnAnotherThreadStopsDelivery() {
        for round in 0..<20 {
            let sut = PassthroughPublisher<Int, Never>()
            let cancelReturned = Atomic<Bool>(false)
            let afterCancel = Atomic<Int>(0)
            let delivered = Atomic<Int>(0)
            let stop = Atomic<Bool>(false)
            let token = sut.sink { _ in
                if cancelReturned.load(ordering: .sequentiallyConsistent) {
                    afterCancel.wrappingAdd(1, ordering: .relaxed)
                }
                delivered.wrappingAdd(1, ordering: .relaxed)
            }
            let finished = runOnThreads(2) { index in
                if index == 0 {
                    var value = 0
                    while !stop.load(ordering: .relaxed) {
                        sut.send(value)
                        value += 1
                    }
                } else {
                    // Wait for the event itself: deliveries are flowing.
                    while delivered.load(ordering: .relaxed) < 100 + round {}
                    token.cancel()
                    cancelReturned.store(true, ordering: .sequentiallyConsistent)
                    // Let the sender run on for a while after the cancel.
                    let seen = delivered.load(ordering: .relaxed)
                    var spins = 0
                    while spins < 200_000 && delivered.load(ordering: .relaxed) == seen { spins += 1 }
                    stop.store(true, ordering: .relaxed)
                }
            }
            #expect(finished)
            #expect(afterCancel.load(ordering: .relaxed) == 0)
        }
    }

    @Test func cancellingOneSubscriberLeavesOthers() {
        let sut = CurrentValuePublisher<Int, Never>(0)
        let first = Received<Int>()
        let second = Received<Int>()
        let firstToken = sut.sink { first.append($0) }
        let secondToken = sut.sink { second.append($0) }
        sut.send(1)
        firstToken.cancel()
        sut.send(2)
        #expect(first.values == [0, 1])
        #expect(second.values == [0, 1, 2])
        secondToken.cancel()
    }
}
