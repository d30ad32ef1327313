import FeedPublishers
import Synchronization
import Testing

@Suite struct AnyCancellableTests {
    @Test func cancelsOnDeinitExactlyOnce() {
        let calls = Atomic<Int>(0)
        do {
            let token = AnyCancellable { calls.wrappingAdd(1, ordering: .relaxed) }
            token.cancel()
            token.cancel()
        }
        #expect(calls.load(ordering: .relaxed) == 1)
        do {
            _ = AnyCancellable { calls.wrappingAdd(1, ordering: .relaxed) }
        }
        #expect(calls.load(ordering: .relaxed) == 2)
    }

    @Test func storesInSetAndArray() {
        let subject = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        var set = Set<AnyCancellable>()
        var array = [AnyCancellable]()
        subject.sink { received.append($0) }.store(in: &set)
        subject.sink { received.append($0 * 10) }.store(in: &array)
        subject.send(1)
        #expect(received.values == [1, 10])
        set.removeAll()
        array.removeAll()
        subject.send(2)
        #expect(received.values == [1, 10])
    }

    @Test func isHashableByIdentity() {
        let first = AnyCancellable {}
        let second = AnyCancellable {}
        #expect(first == first)
        #expect(first != second)
        #expect(Set([first, first, second]).count == 2)
    }
}
