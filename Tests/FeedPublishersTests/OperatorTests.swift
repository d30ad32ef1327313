import FeedPublishers
import Testing

@Suite struct OperatorTests {
    @Test func mapTransformsValues() {
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<String>()
        let token = sut.map { "#\($0)" }.sink { received.append($0) }
        sut.send(1)
        sut.send(2)
        #expect(received.values == ["#1", "#2"])
        token.cancel()
    }

    @Test func compactMapDropsNilsAndKeepsDemand() {
        let sut = PassthroughPublisher<String, TestError>()
        let tracker = TrackingSubscriber<Int, TestError>(initialDemand: .max(2))
        sut.compactMap { Int($0) }.receive(subscriber: tracker)
        for text in ["1", "x", "y", "2", "3"] { sut.send(text) }
        #expect(tracker.values == [1, 2])
    }

    @Test func filterForwardsMatchingValuesAndKeepsDemand() {
        let sut = PassthroughPublisher<Int, TestError>()
        let tracker = TrackingSubscriber<Int, TestError>(initialDemand: .max(2))
        sut.filter { $0.isMultiple(of: 2) }.receive(subscriber: tracker)
        for value in 1...10 { sut.send(value) }
        #expect(tracker.values == [2, 4])
    }

    @Test func removeDuplicatesDropsRepeats() {
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        let token = sut.removeDuplicates().sink { received.append($0) }
        for value in [1, 1, 2, 2, 2, 1, 3, 3] { sut.send(value) }
        #expect(received.values == [1, 2, 1, 3])
        token.cancel()
    }

    @Test func removeDuplicatesByPredicate() {
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        let token = sut.removeDuplicates { $0 / 10 == $1 / 10 }.sink { received.append($0) }
        for value in [10, 11, 19, 20, 25, 5] { sut.send(value) }
        #expect(received.values == [10, 20, 5])
        token.cancel()
    }

    @Test func dropFirstOmitsLeadingValues() {
        let sut = CurrentValuePublisher<Int, Never>(0)
        let received = Received<Int>()
        let token = sut.dropFirst().sink { received.append($0) }
        let twoDropped = sut.dropFirst(2).sink { received.append($0 * 100) }
        sut.send(1)
        sut.send(2)
        #expect(received.values == [1, 2, 200])
        withExtendedLifetime((token, twoDropped)) {}
    }

    @Test func prefixFinishesAndCancelsUpstream() {
        let sut = PassthroughPublisher<Int, TestError>()
        let tracker = TrackingSubscriber<Int, TestError>(initialDemand: .unlimited)
        sut.prefix(2).receive(subscriber: tracker)
        for value in 1...4 { sut.send(value) }
        #expect(tracker.history == [.subscribed, .value(1), .value(2), .completion(.finished)])
        let zero = TrackingSubscriber<Int, TestError>(initialDemand: .unlimited)
        sut.prefix(0).receive(subscriber: zero)
        sut.send(5)
        #expect(zero.history == [.subscribed, .completion(.finished)])
    }

    @Test func operatorsForwardFailure() {
        let sut = PassthroughPublisher<Int, TestError>()
        let tracker = TrackingSubscriber<String, TestError>(initialDemand: .unlimited)
        sut.map { $0 * 2 }.filter { $0 > 2 }.compactMap { "\($0)" }.removeDuplicates().dropFirst().prefix(5)
            .eraseToAnyPublisher()
            .receive(subscriber: tracker)
        for value in [1, 2, 2, 3, 4] { sut.send(value) }
        sut.send(completion: .failure(TestError(code: 3)))
        #expect(tracker.history == [.subscribed, .value("6"), .value("8"), .completion(.failure(TestError(code: 3)))])
    }
}
