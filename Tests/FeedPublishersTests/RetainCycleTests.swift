import FeedPublishers
import Synchronization
import Testing

@Suite struct RetainCycleTests {
    @Test func droppingTheCancellableFreesSubscriberAndPublisher() {
        weak var weakSubject: PassthroughPublisher<Int, Never>?
        weak var weakProbe: LifetimeProbe?
        do {
            let subject = PassthroughPublisher<Int, Never>()
            let probe = LifetimeProbe()
            weakSubject = subject
            weakProbe = probe
            var token: AnyCancellable? = subject.sink { probe.counter.wrappingAdd($0, ordering: .relaxed) }
            subject.send(1)
            #expect(probe.counter.load(ordering: .relaxed) == 1)
            token = nil
            #expect(token == nil)
        }
        #expect(weakSubject == nil)
        #expect(weakProbe == nil)
    }

    @Test func subscriberIsFreedWhilePublisherLivesOn() {
        let subject = CurrentValuePublisher<Int, Never>(0)
        weak var weakProbe: LifetimeProbe?
        do {
            let probe = LifetimeProbe()
            weakProbe = probe
            let token = subject.map { $0 + 1 }.filter { $0 > 0 }.sink { probe.counter.store($0, ordering: .relaxed) }
            subject.send(1)
            #expect(probe.counter.load(ordering: .relaxed) == 2)
            withExtendedLifetime(token) {}
        }
        #expect(weakProbe == nil)
    }

    @Test func completedSubjectNoLongerHoldsItsSubscribers() {
        let subject = PassthroughPublisher<Int, Never>()
        weak var weakProbe: LifetimeProbe?
        var token: AnyCancellable?
        do {
            let probe = LifetimeProbe()
            weakProbe = probe
            token = subject.sink { probe.counter.store($0, ordering: .relaxed) }
        }
        #expect(token != nil)
        subject.send(completion: .finished)
        #expect(weakProbe != nil, "the live AnyCancellable still owns the sink")
        token = nil
        #expect(weakProbe == nil)
    }

    @Test func sealedHandleDoesNotKeepSubscriberAlive() {
        let events = EventPublisher<Int>()
        weak var weakProbe: LifetimeProbe?
        do {
            let probe = LifetimeProbe()
            weakProbe = probe
            let token = events.publisher().sink { probe.counter.store($0, ordering: .relaxed) }
            events.send(3)
            #expect(probe.counter.load(ordering: .relaxed) == 3)
            withExtendedLifetime(token) {}
        }
        #expect(weakProbe == nil)
    }
}
