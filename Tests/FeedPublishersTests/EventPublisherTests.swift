import FeedPublishers
import Synchronization
import Testing

@Suite struct EventPublisherTests {
    @Test func loggerRunsOncePerSendBeforeDelivery() {
        let log = Received<String>()
        let sut = EventPublisher<Int> { log.append("log \($0)") }
        let token = sut.publisher().sink { log.append("got \($0)") }
        sut.send(1)
        sut.send(2)
        #expect(log.values == ["log 1", "got 1", "log 2", "got 2"])
        token.cancel()
    }

    @Test func defaultLoggerDoesNothing() {
        let sut = EventPublisher<String>()
        let received = Received<String>()
        let first = sut.publisher().sink { received.append("a" + $0) }
        let second = sut.publisher().sink { received.append("b" + $0) }
        sut.send("x")
        #expect(received.values == ["ax", "bx"])
        withExtendedLifetime((first, second)) {}
    }
}
