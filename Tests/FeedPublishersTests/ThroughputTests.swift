import FeedPublishers
import Foundation
import Testing

/// W3-shaped throughput probe. Prints deliveries per second; asserts only the sums, never timing.
///
/// Run in release mode: `FEEDPUBLISHERS_BENCH=1 swift test -c release --filter ThroughputTests`.
@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["FEEDPUBLISHERS_BENCH"] != nil))
struct ThroughputTests {
    final class Sum: Sendable {
        // Written only by the one sending thread of each run; read after it finished.
        nonisolated(unsafe) var value = 0
    }

    private static let events = Int(ProcessInfo.processInfo.environment["FEEDPUBLISHERS_BENCH_EVENTS"] ?? "") ?? 1_000_000

    private func seconds(_ body: () -> Void) -> Double {
        let start = DispatchTime.now().uptimeNanoseconds
        body()
        return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
    }

    @Test(arguments: [1, 10, 100])
    func passthroughFanOut(subscribers: Int) {
        let events = Self.events
        let subject = PassthroughPublisher<Int, Never>()
        let sums = (0..<subscribers).map { _ in Sum() }
        let tokens = sums.map { sum in subject.sink { sum.value &+= $0 } }
        let elapsed = seconds { for value in 0..<events { subject.send(value) } }
        withExtendedLifetime(tokens) {}
        print("W3 passthrough_s\(subscribers): \(Int(Double(events * subscribers) / elapsed)) deliveries/s")
        #expect(sums.allSatisfy { $0.value == events * (events - 1) / 2 })
    }

    @Test(arguments: [1, 10, 100])
    func currentValueFanOut(subscribers: Int) {
        let events = Self.events
        let subject = CurrentValuePublisher<Int, Never>(0)
        let sums = (0..<subscribers).map { _ in Sum() }
        let tokens = sums.map { sum in subject.sink { sum.value &+= $0 } }
        let elapsed = seconds { for value in 0..<events { subject.send(value) } }
        withExtendedLifetime(tokens) {}
        print("W3 currentvalue_s\(subscribers): \(Int(Double(events * subscribers) / elapsed)) deliveries/s")
        #expect(sums.allSatisfy { $0.value == events * (events - 1) / 2 })
    }

    @Test func valuesAgainstAsyncStream() async {
        let events = Self.events
        for _ in 0..<2 {
            // values
            let subject = PassthroughPublisher<Int, Never>()
            let sequence = subject.values
            let start = DispatchTime.now().uptimeNanoseconds
            var iterator = sequence.makeAsyncIterator()
            let consumer = Task.detached {
                var sum = 0
                while let value = await iterator.next() { sum &+= value }
                return sum
            }
            for value in 0..<events { subject.send(value) }
            subject.send(completion: .finished)
            let sum = await consumer.value
            let valuesRate = Double(events) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9)
            #expect(sum == events * (events - 1) / 2)

            // AsyncStream, as the peer measures it
            let (stream, continuation) = AsyncStream.makeStream(of: Int.self, bufferingPolicy: .unbounded)
            let streamStart = DispatchTime.now().uptimeNanoseconds
            let streamConsumer = Task.detached {
                var sum = 0
                for await value in stream { sum &+= value }
                return sum
            }
            for value in 0..<events { continuation.yield(value) }
            continuation.finish()
            let streamSum = await streamConsumer.value
            let streamRate = Double(events) / (Double(DispatchTime.now().uptimeNanoseconds - streamStart) / 1e9)
            #expect(streamSum == events * (events - 1) / 2)
            print("W3 values_s1: \(Int(valuesRate)) /s   asyncstream_s1: \(Int(streamRate)) /s")
        }
    }
}
