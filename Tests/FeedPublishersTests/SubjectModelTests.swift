import FeedPublishers
import Testing

/// The subjects against the reference model of `shared/COMBINE-SEMANTICS.md` (`Support/SubjectModel.swift`).
@Suite struct SubjectModelTests {
    typealias Tracker = TrackingSubscriber<Int, TestError>

    // MARK: - Randomized scripts

    /// How many random scripts each randomized test runs.
    static let scriptsPerTest = 3_000

    @Test(arguments: [SubjectModel.Kind.passthrough, .currentValue(initial: 0)])
    func randomScriptsMatchTheModel(kind: SubjectModel.Kind) {
        let base: UInt64 = kind == .passthrough ? 0x5EED_0000 : 0x5EED_8000
        let summary = runScripts(kind: kind, seeds: base..<(base + UInt64(Self.scriptsPerTest)), reentrancy: 0.3)
        // The scripts must actually exercise re-entrancy, or agreement would prove little.
        #expect(summary.nested * 4 >= Self.scriptsPerTest, "nested sends in \(summary.nested) scripts")
        #expect(summary.deeplyNested > 0, "sends nested three deep in \(summary.deeplyNested) scripts")
    }

    @Test(arguments: [SubjectModel.Kind.passthrough, .currentValue(initial: 0)])
    func reentrantHeavyScriptsMatchTheModel(kind: SubjectModel.Kind) {
        let base: UInt64 = kind == .passthrough ? 0xAB_0000 : 0xAB_8000
        let summary = runScripts(kind: kind, seeds: base..<(base + UInt64(Self.scriptsPerTest)), reentrancy: 0.8)
        #expect(summary.nested * 2 >= Self.scriptsPerTest, "nested sends in \(summary.nested) scripts")
        #expect(summary.deeplyNested * 10 >= Self.scriptsPerTest, "three deep in \(summary.deeplyNested) scripts")
    }

    private struct Summary {
        var nested = 0
        var deeplyNested = 0
    }

    /// Runs each seed's script on the model and on the real subject; records the first mismatch with its seed and script.
    private func runScripts(
        kind: SubjectModel.Kind, seeds: Range<UInt64>, reentrancy: Double
    ) -> Summary {
        var summary = Summary()
        for seed in seeds {
            let script = SubjectScript.generate(seed: seed, kind: kind, reentrancy: reentrancy)
            let model = ModelRun(script)
            let expected = model.run()
            let actual = LiveRun(script).run()
            if model.maxSendDepth >= 2 { summary.nested += 1 }
            if model.maxSendDepth >= 3 { summary.deeplyNested += 1 }
            guard expected == actual else {
                Issue.record(Comment(rawValue: mismatchReport(script, expected: expected, actual: actual)))
                return summary
            }
        }
        return summary
    }

    private func mismatchReport(_ script: SubjectScript, expected: ScriptOutcome, actual: ScriptOutcome) -> String {
        var lines = ["The subject disagrees with the model. Script:", script.description, "Traces (model | subject):"]
        for index in 0..<max(expected.traces.count, actual.traces.count) {
            let model = index < expected.traces.count ? expected.traces[index].map(\.description) : ["—"]
            let real = index < actual.traces.count ? actual.traces[index].map(\.description) : ["—"]
            let mark = model == real ? " " : "≠"
            lines.append("\(mark) s\(index): [\(model.joined(separator: ", "))] | [\(real.joined(separator: ", "))]")
        }
        if expected.value != actual.value {
            lines.append("≠ value: \(expected.value.map(String.init) ?? "nil") | \(actual.value.map(String.init) ?? "nil")")
        }
        return lines.joined(separator: "\n")
    }

    // MARK: - Fixed cases

    /// s1 sends from inside `receive(_:)`; s2 (unlimited), not reached yet by the outer send, still gets the outer value.
    @Test func nestedSendDoesNotHideTheOuterValueFromALaterSubscriber() {
        let sut = CurrentValuePublisher<Int, TestError>(0)
        let s1 = Tracker(initialDemand: .unlimited) { value in
            if value == 1 { sut.send(2) }
            return .none
        }
        let s2 = Tracker(initialDemand: .unlimited)
        sut.receive(subscriber: s1)
        sut.receive(subscriber: s2)
        sut.send(1)
        #expect(s1.values == [0, 1, 2])
        #expect(s2.values == [0, 1, 2], "the outer value first, then the nested one")
        #expect(sut.value == 2)

        let model = SubjectModel(.currentValue(initial: 0))
        model.subscribe(initialDemand: .unlimited) { value in
            if value == 1 { model.send(2) }
            return .none
        }
        model.subscribe(initialDemand: .unlimited) { _ in .none }
        model.send(1)
        #expect(model.trace(of: 0) == s1.history.map(\.modelEvent))
        #expect(model.trace(of: 1) == s2.history.map(\.modelEvent))
    }

    @Test func nestedSendsThreeDeepReachEverySinkInSendOrder() {
        let sut = CurrentValuePublisher<Int, Never>(0)
        let first = Received<Int>()
        let second = Received<Int>()
        let third = Received<Int>()
        let tokens = [
            sut.sink { value in
                first.append(value)
                if value == 1 { sut.send(2) }
            },
            sut.sink { value in
                second.append(value)
                if value == 2 { sut.send(3) }
            },
            sut.sink { third.append($0) },
        ]
        sut.send(1)
        #expect(first.values == [0, 1, 2, 3])
        #expect(second.values == [0, 1, 2, 3])
        #expect(third.values == [0, 1, 2, 3])
        #expect(sut.value == 3)
        withExtendedLifetime(tokens) {}
    }

    @Test func laterSubscriberWithFiniteDemandGetsTheOuterValueFirst() {
        let sut = CurrentValuePublisher<Int, TestError>(0)
        let s1 = Tracker(initialDemand: .max(2)) { value in
            if value == 1 { sut.send(2) }
            return .none
        }
        // Demand for 0 and 1 only: it takes the outer value and refuses the nested one.
        let s2 = Tracker(initialDemand: .max(2))
        sut.receive(subscriber: s1)
        sut.receive(subscriber: s2)
        sut.send(1)
        #expect(s1.values == [0, 1])
        #expect(s2.values == [0, 1])
        s2.request(.max(1))
        #expect(s2.values == [0, 1, 2], "refused for zero demand, so its next request catches up")
    }

    @Test func passthroughStillDeliversTheNestedValueAtOnce() {
        let sut = PassthroughPublisher<Int, TestError>()
        let s1 = Tracker(initialDemand: .unlimited) { value in
            if value == 1 { sut.send(2) }
            return .none
        }
        let s2 = Tracker(initialDemand: .unlimited)
        sut.receive(subscriber: s1)
        sut.receive(subscriber: s2)
        sut.send(1)
        #expect(s1.values == [1, 2])
        #expect(s2.values == [2, 1])
    }

    // MARK: - The model against the spec's own examples

    @Test func modelFollowsTheSpecOnDemandAndCatchUp() {
        let model = SubjectModel(.currentValue(initial: 0))
        let index = model.subscribe(initialDemand: .none) { _ in .none }
        #expect(model.trace(of: index) == [.subscribed], "nothing before demand")
        model.send(1)
        model.send(2)
        model.request(index, .max(1))
        #expect(model.trace(of: index) == [.subscribed, .value(2)], "the value current at the first request")
        model.request(index, .max(1))
        #expect(model.trace(of: index) == [.subscribed, .value(2)], "nothing refused, so nothing delivered")
        model.send(3)
        model.send(4)
        model.request(index, .max(5))
        #expect(model.trace(of: index) == [.subscribed, .value(2), .value(3), .value(4)])
        model.send(completion: .finished)
        model.send(5)
        #expect(model.value == 4)
        let late = model.subscribe(initialDemand: .unlimited) { _ in .none }
        #expect(model.trace(of: late) == [.subscribed, .finished])
    }

    @Test func modelGivesASenderWithDemandOneNoNestedValue() {
        for kind in [SubjectModel.Kind.passthrough, .currentValue(initial: 0)] {
            let model = SubjectModel(kind)
            let sender = model.subscribe(initialDemand: .max(kind == .passthrough ? 1 : 2)) { value in
                if value == 1 { model.send(2) }
                return .none
            }
            model.send(1)
            let expected: [SubjectModel.Event] =
                kind == .passthrough ? [.subscribed, .value(1)] : [.subscribed, .value(0), .value(1)]
            #expect(model.trace(of: sender) == expected, "\(kind)")
        }
    }
}
