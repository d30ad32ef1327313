import Dispatch
import FeedPublishers
import Foundation
import Synchronization
import FeedTestThreads
import Testing

// Blocks: waits on semaphores for values delivered on other threads and on a run loop thread.
@Suite(.ownThreads) struct ReceiveOnTests {
    @Test func deliversOnTheQueueInOrderWithoutLosingEarlyValues() {
        let queue = DispatchQueue(label: "receive-on-test")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 42)
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        let offQueue = Atomic<Int>(0)
        let done = DispatchSemaphore(value: 0)
        let token = sut.receive(on: queue).sink(
            receiveCompletion: { _ in done.signal() },
            receiveValue: { value in
                if DispatchQueue.getSpecific(key: key) != 42 { offQueue.wrappingAdd(1, ordering: .relaxed) }
                received.append(value)
            })
        // Sent right after sink: nothing is lost even though the sink's subscription arrives later on the queue.
        for value in 0..<1_000 { sut.send(value) }
        sut.send(completion: .finished)
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(received.values == Array(0..<1_000))
        #expect(offQueue.load(ordering: .relaxed) == 0)
        token.cancel()
    }

    @Test func honoursFiniteDownstreamDemand() {
        let queue = DispatchQueue(label: "receive-on-demand")
        let sut = PassthroughPublisher<Int, TestError>()
        let gotTwo = DispatchSemaphore(value: 0)
        let tracker = TrackingSubscriber<Int, TestError>(initialDemand: .max(2)) { value in
            if value == 1 { gotTwo.signal() }
            return .none
        }
        sut.receive(on: queue).receive(subscriber: tracker)
        for value in 0..<10 { sut.send(value) }
        #expect(gotTwo.wait(timeout: .now() + 10) == .success)
        queue.sync {}
        #expect(tracker.values == [0, 1])
        tracker.request(.max(1))
        queue.sync {}
        #expect(tracker.values == [0, 1, 2])
    }

    @Test func cancelOnTheQueueStopsDelivery() {
        let queue = DispatchQueue(label: "receive-on-cancel")
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        let token = sut.receive(on: queue).sink { received.append($0) }
        sut.send(1)
        queue.sync { token.cancel() }
        sut.send(2)
        queue.sync {}
        #expect(received.values == [1])
    }

    @Test @MainActor func runLoopMainDeliversOnTheMainActor() async {
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        let token = sut.receive(on: RunLoop.main).sink { value in
            // Runs on the main queue: the main actor's executor.
            MainActor.assumeIsolated { received.append(value) }
        }
        sut.send(1)
        sut.send(2)
        await drainMainQueue()
        #expect(received.values == [1, 2])
        token.cancel()
    }

    @Test func otherRunLoopDeliversOnItsThreadWhileItRuns() {
        let loopReady = DispatchSemaphore(value: 0)
        let stop = Atomic<Bool>(false)
        // RunLoop is not Sendable; the semaphore orders the write before the read.
        nonisolated(unsafe) var capturedLoop: RunLoop?
        let thread = Thread {
            capturedLoop = RunLoop.current
            loopReady.signal()
            while !stop.load(ordering: .relaxed) {
                RunLoop.current.run(until: Date(timeIntervalSinceNow: 0.01))
            }
        }
        thread.start()
        #expect(loopReady.wait(timeout: .now() + 10) == .success)
        guard let loop = capturedLoop else { return }
        let sut = PassthroughPublisher<Int, Never>()
        let received = Received<Int>()
        let done = DispatchSemaphore(value: 0)
        let token = sut.receive(on: loop).sink { value in
            received.append(value)
            if value == 3 { done.signal() }
        }
        for value in 1...3 { sut.send(value) }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(received.values == [1, 2, 3])
        stop.store(true, ordering: .relaxed)
        token.cancel()
    }
}
