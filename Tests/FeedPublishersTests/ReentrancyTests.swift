import FeedPublishers
import Synchronization
import Testing

@Suite struct ReentrancyTests {
    @Test func subscriberMaySendFromInsideReceive() {
        let sut = PassthroughPublisher<Int, Never>()
        let a = Received<Int>()
        let b = Received<Int>()
        let tokenA = sut.sink { value in
            a.append(value)
            if value == 1 { sut.send(2) }
        }
        let tokenB = sut.sink { b.append($0) }
        sut.send(1)
        // The nested send is delivered at once, to everyone with demand, the sender included.
        #expect(a.values == [1, 2])
        #expect(b.values == [2, 1])
        withExtendedLifetime((tokenA, tokenB)) {}
    }

    @Test func subscriberWithDemandOneDoesNotGetItsOwnNestedValue() {
        let sut = PassthroughPublisher<Int, TestError>()
        let tracker = TrackingSubscriber<Int, TestError>(initialDemand: .max(1)) { value in
            if value == 1 { sut.send(2) }
            return .none
        }
        let other = TrackingSubscriber<Int, TestError>(initialDemand: .unlimited)
        sut.receive(subscriber: tracker)
        sut.receive(subscriber: other)
        sut.send(1)
        #expect(tracker.values == [1])
        #expect(other.values == [2, 1])
    }

    @Test func subscriberMayCancelItselfFromInsideReceive() {
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        let holder = Locked<AnyCancellable?>(nil)
        let token = sut.sink { value in
            received.append(value)
            if value == 2 { holder.withLock { $0 }?.cancel() }
        }
        holder.withLock { $0 = token }
        for value in 1...5 { sut.send(value) }
        #expect(received.values == [1, 2])
    }

    @Test func subscriberMaySubscribeFromInsideReceive() {
        let sut = CurrentValuePublisher<Int, Never>(0)
        let inner = Received<Int>()
        let tokens = Locked<[AnyCancellable]>([])
        let outer = sut.sink { value in
            if value == 1 {
                let token = sut.sink { inner.append($0) }
                tokens.withLock { $0.append(token) }
            }
        }
        sut.send(1)
        sut.send(2)
        #expect(inner.values == [1, 2])
        withExtendedLifetime(outer) {}
    }

    @Test func subscriberMayCancelAnotherWhileNestedInsideIt() {
        // B's receive sends; A's receive (nested) cancels B, whose own delivery is still on the stack.
        let sut = PassthroughPublisher<Int, Never>()
        let holder = Locked<AnyCancellable?>(nil)
        let b = Received<Int>()
        let tokenA = sut.sink { value in
            if value == 2 { holder.withLock { $0 }?.cancel() }
        }
        let tokenB = sut.sink { value in
            b.append(value)
            if value == 1 { sut.send(2) }
        }
        holder.withLock { $0 = tokenB }
        sut.send(1)
        sut.send(3)
        #expect(b.values == [1])
        withExtendedLifetime(tokenA) {}
    }

    @Test func subscriberMayCompleteFromInsideReceive() {
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<String>()
        let token = sut.sink(
            receiveCompletion: { _ in received.append("done") },
            receiveValue: { value in
                received.append("\(value)")
                if value == 1 { sut.send(completion: .finished) }
            })
        sut.send(1)
        sut.send(2)
        #expect(received.values == ["1", "done"])
        token.cancel()
    }
}
