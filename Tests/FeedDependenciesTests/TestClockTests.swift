import FeedDependencies
import Testing

/// On the main actor, woken sleepers run in the order the clock resumes them, so the order
/// and the instant each one observes are deterministic.
@MainActor @Suite struct TestClockTests {
    @Test func sleeperWakesExactlyAtItsDeadline() async throws {
        let sut = TestClock()
        let woke = Recorder<VirtualInstant>()
        let task = Task {
            try await sut.sleep(for: .seconds(1))
            woke.record(sut.now)
        }
        #expect(await eventually { sut.sleeperCount == 1 })

        await sut.advance(by: .milliseconds(999))
        #expect(sut.now == VirtualInstant(offset: .milliseconds(999)))
        #expect(sut.sleeperCount == 1)
        #expect(woke.history.isEmpty)

        await sut.advance(by: .milliseconds(1))
        #expect(await eventually { !woke.history.isEmpty })
        #expect(woke.history == [VirtualInstant(offset: .seconds(1))])
        #expect(sut.sleeperCount == 0)
        try await task.value
    }

    @Test func sleepersWakeInDeadlineOrder() async throws {
        let sut = TestClock()
        let order = Recorder<String>()
        let tasks = [("3 s", 3), ("1 s", 1), ("2 s", 2)].map { name, seconds in
            Task {
                try await sut.sleep(for: .seconds(seconds))
                order.record("\(name) at \(sut.now)")
            }
        }
        #expect(await eventually { sut.sleeperCount == 3 })

        await sut.advance(by: .seconds(5))

        #expect(await eventually { order.history.count == 3 })
        #expect(order.history == ["1 s at 1.0 seconds", "2 s at 2.0 seconds", "3 s at 3.0 seconds"])
        #expect(sut.now == VirtualInstant(offset: .seconds(5)))
        for task in tasks { try await task.value }
    }

    @Test func advanceMovesTimeEvenWithoutSleepers() async {
        let sut = TestClock()
        await sut.advance(by: .seconds(2))
        #expect(sut.now == VirtualInstant(offset: .seconds(2)))
        await sut.advance(to: VirtualInstant(offset: .seconds(1)))
        #expect(sut.now == VirtualInstant(offset: .seconds(2)))
    }

    @Test func sleepUntilAPastDeadlineReturnsAtOnce() async throws {
        let sut = TestClock(now: VirtualInstant(offset: .seconds(10)))
        try await sut.sleep(until: VirtualInstant(offset: .seconds(3)))
        try await sut.sleep(for: .zero)
        #expect(sut.now == VirtualInstant(offset: .seconds(10)))
    }

    @Test func runWakesEverySleeperIncludingOnesStartedByWokenTasks() async throws {
        let sut = TestClock()
        let ticks = Recorder<VirtualInstant>()
        let task = Task {
            for _ in 0..<3 {
                try await sut.sleep(for: .seconds(1))
                ticks.record(sut.now)
            }
        }
        #expect(await eventually { sut.sleeperCount == 1 })
        for _ in 0..<100 where ticks.history.count < 3 {
            await sut.run()
            #expect(await eventually { ticks.history.count == 3 || sut.sleeperCount == 1 })
        }
        try await task.value
        #expect(ticks.history.map(\.offset) == [.seconds(1), .seconds(2), .seconds(3)])
    }

    @Test func cancellingASleeperThrowsCancellationError() async {
        let sut = TestClock()
        let task = Task { try await sut.sleep(for: .seconds(1)) }
        #expect(await eventually { sut.sleeperCount == 1 })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(sut.sleeperCount == 0)
    }

    @Test func sleepInACancelledTaskThrowsAtOnce() async {
        let sut = TestClock()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await sut.sleep(for: .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(sut.sleeperCount == 0)
    }

    @Test func worksThroughTheContinuousClockDependency() async throws {
        let clock = TestClock()
        let done = Recorder<Bool>()
        let task = withDependencies {
            $0.context = .test
            $0.continuousClock = clock
        } operation: {
            Task {
                @Dependency(\.continuousClock) var sleeper
                try await sleeper.sleep(for: .seconds(1))
                done.record(true)
            }
        }
        #expect(await eventually { clock.sleeperCount == 1 })
        await clock.advance(by: .seconds(1))
        try await task.value
        #expect(done.history == [true])
    }
}

@Suite struct ImmediateClockTests {
    @Test func sleepReturnsAtOnceAndAdvancesNow() async throws {
        let sut = ImmediateClock()
        try await sut.sleep(for: .seconds(1))
        #expect(sut.now == VirtualInstant(offset: .seconds(1)))
        try await sut.sleep(for: .seconds(60))
        #expect(sut.now == VirtualInstant(offset: .seconds(61)))
        try await sut.sleep(until: VirtualInstant(offset: .seconds(5)))
        #expect(sut.now == VirtualInstant(offset: .seconds(61)))
    }

    @Test func sleepInACancelledTaskThrows() async {
        let sut = ImmediateClock()
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await sut.sleep(for: .seconds(1))
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(sut.now == .zero)
    }

    @Test(.dependencies()) func isTheTestValueOfContinuousClock() async throws {
        @Dependency(\.continuousClock) var clock
        let immediate = try #require(clock as? ImmediateClock)
        try await clock.sleep(for: .seconds(3600))
        #expect(immediate.now == VirtualInstant(offset: .seconds(3600)))
    }

    @Test func liveValueIsTheSystemContinuousClock() {
        #expect(DependencyValues(context: .live).continuousClock is ContinuousClock)
    }
}
