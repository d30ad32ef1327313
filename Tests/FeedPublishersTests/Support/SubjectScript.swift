import FeedPublishers

/// A deterministic random number generator (SplitMix64), so a failing script can be rebuilt from its seed.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}

/// A single-threaded scenario for one subject: top-level steps, plus what each subscriber does
/// (returns, and calls re-entrantly) when it receives its n-th value.
///
/// Subscribers are named by the order in which they subscribe (0, 1, …). An action naming a
/// subscriber that does not exist yet does nothing, in every runner alike.
struct SubjectScript: Sendable, CustomStringConvertible {
    typealias Demand = SubjectModel.Demand

    enum Action: Sendable, CustomStringConvertible {
        case subscribe(initialDemand: Demand)
        case send(Int)
        case request(subscriber: Int, Demand)
        case cancel(subscriber: Int)
        case finish
        case fail(code: Int)

        var description: String {
            switch self {
            case .subscribe(let demand): "subscribe(initial: \(demand))"
            case .send(let value): "send(\(value))"
            case .request(let subscriber, let demand): "s\(subscriber).request(\(demand))"
            case .cancel(let subscriber): "s\(subscriber).cancel()"
            case .finish: "send(completion: .finished)"
            case .fail(let code): "send(completion: .failure(\(code)))"
            }
        }
    }

    /// What a subscriber does inside `receive(_:)`: the `actions`, in order, then it returns `demand`.
    struct Reaction: Sendable, CustomStringConvertible {
        var actions: [Action]
        var demand: Demand

        var description: String {
            let calls = actions.map(\.description).joined(separator: "; ")
            return calls.isEmpty ? "return \(demand)" : "\(calls); return \(demand)"
        }
    }

    static let maxSubscribers = 5
    static let reactionsPerSubscriber = 4

    let seed: UInt64
    let kind: SubjectModel.Kind
    let steps: [Action]
    /// `reactions[s][n]`: what subscriber `s` does on its n-th value (n from 0).
    let reactions: [[Reaction]]
    /// What subscriber `s` returns for every value after its table of reactions.
    let laterDemand: [Demand]

    /// What subscriber `subscriber` does when it receives its `ordinal`-th value (from 0).
    func reaction(of subscriber: Int, ordinal: Int) -> Reaction {
        guard subscriber < reactions.count else { return Reaction(actions: [], demand: .none) }
        let table = reactions[subscriber]
        return ordinal < table.count ? table[ordinal] : Reaction(actions: [], demand: laterDemand[subscriber])
    }

    var description: String {
        var lines = ["seed \(seed), \(kind)", "steps:"]
        lines += steps.map { "  \($0)" }
        lines.append("reactions (subscriber: n-th value → what it does):")
        for (subscriber, table) in reactions.enumerated() {
            for (ordinal, reaction) in table.enumerated() {
                lines.append("  s\(subscriber) #\(ordinal): \(reaction)")
            }
            lines.append("  s\(subscriber) later: return \(laterDemand[subscriber])")
        }
        return lines.joined(separator: "\n")
    }

    // MARK: - Generation

    /// Builds the script for `seed`; `reentrancy` is the chance that a reaction calls the subject.
    static func generate(seed: UInt64, kind: SubjectModel.Kind, reentrancy: Double) -> SubjectScript {
        var random = SeededGenerator(seed: seed)
        var nextValue = 1

        func demand(zeroWeight: Int) -> Demand {
            let roll = Int.random(in: 0..<(zeroWeight + 75), using: &random)
            switch roll {
            case ..<zeroWeight: return .none
            case ..<(zeroWeight + 30): return .max(1)
            case ..<(zeroWeight + 50): return .max(2)
            case ..<(zeroWeight + 60): return .max(3)
            default: return .unlimited
            }
        }

        func subscriber() -> Int {
            Int.random(in: 0..<maxSubscribers, using: &random)
        }

        func send() -> Action {
            defer { nextValue += 1 }
            return .send(nextValue)
        }

        func stepAction() -> Action {
            let roll = Int.random(in: 0..<100, using: &random)
            switch roll {
            case ..<42: return send()
            case ..<54: return .subscribe(initialDemand: demand(zeroWeight: 25))
            case ..<78: return .request(subscriber: subscriber(), demand(zeroWeight: 5))
            case ..<86: return .cancel(subscriber: subscriber())
            case ..<89: return .request(subscriber: subscriber(), .none)
            case ..<95: return .finish
            default: return .fail(code: Int.random(in: 1...3, using: &random))
            }
        }

        func nestedAction() -> Action {
            let roll = Int.random(in: 0..<100, using: &random)
            switch roll {
            case ..<58: return send()
            case ..<76: return .request(subscriber: subscriber(), demand(zeroWeight: 5))
            case ..<86: return .cancel(subscriber: subscriber())
            case ..<95: return .subscribe(initialDemand: demand(zeroWeight: 25))
            case ..<98: return .finish
            default: return .fail(code: Int.random(in: 1...3, using: &random))
            }
        }

        var steps: [Action] = []
        for _ in 0..<Int.random(in: 1...3, using: &random) {
            steps.append(.subscribe(initialDemand: demand(zeroWeight: 25)))
        }
        for _ in 0..<Int.random(in: 3...14, using: &random) {
            var action = stepAction()
            // Completion ends a script early; keep most scripts running longer.
            if case .finish = action, Bool.random(using: &random) { action = send() }
            if case .fail = action, Bool.random(using: &random) { action = send() }
            steps.append(action)
        }

        var reactions: [[Reaction]] = []
        var laterDemand: [Demand] = []
        for _ in 0..<maxSubscribers {
            var table: [Reaction] = []
            for _ in 0..<reactionsPerSubscriber {
                var actions: [Action] = []
                if Double.random(in: 0..<1, using: &random) < reentrancy {
                    for _ in 0..<Int.random(in: 1...2, using: &random) { actions.append(nestedAction()) }
                }
                table.append(Reaction(actions: actions, demand: demand(zeroWeight: 40)))
            }
            reactions.append(table)
            laterDemand.append(Bool.random(using: &random) ? .none : .max(1))
        }
        return SubjectScript(seed: seed, kind: kind, steps: steps, reactions: reactions, laterDemand: laterDemand)
    }
}

extension SubjectModel.Demand {
    /// The same demand as the library counts it.
    var asDemand: Subscribers.Demand {
        switch self {
        case .max(let count): .max(count)
        case .unlimited: .unlimited
        }
    }
}

// MARK: - Runners

/// What one run of a script produced: each subscriber's events and the final value.
struct ScriptOutcome: Equatable {
    var traces: [[SubjectModel.Event]]
    var value: Int?
}

/// Runs a script against the reference model.
final class ModelRun {
    private let script: SubjectScript
    private let model: SubjectModel
    private var ordinals: [Int] = []
    private var sendDepth = 0
    /// The deepest nesting of `send` calls seen (1: no re-entrant send).
    private(set) var maxSendDepth = 0

    init(_ script: SubjectScript) {
        self.script = script
        model = SubjectModel(script.kind)
    }

    func run() -> ScriptOutcome {
        for step in script.steps { perform(step) }
        let traces = (0..<model.subscriberCount).map { model.trace(of: $0) }
        return ScriptOutcome(traces: traces, value: model.value)
    }

    private func perform(_ action: SubjectScript.Action) {
        switch action {
        case .subscribe(let demand):
            guard ordinals.count < SubjectScript.maxSubscribers else { return }
            let index = ordinals.count
            ordinals.append(0)
            model.subscribe(initialDemand: demand) { [unowned self] _ in react(index) }
        case .send(let value):
            sendDepth += 1
            maxSendDepth = max(maxSendDepth, sendDepth)
            model.send(value)
            sendDepth -= 1
        case .request(let subscriber, let demand):
            guard subscriber < ordinals.count else { return }
            model.request(subscriber, demand)
        case .cancel(let subscriber):
            guard subscriber < ordinals.count else { return }
            model.cancel(subscriber)
        case .finish:
            model.send(completion: .finished)
        case .fail(let code):
            model.send(completion: .failed(code))
        }
    }

    private func react(_ subscriber: Int) -> SubjectModel.Demand {
        let reaction = script.reaction(of: subscriber, ordinal: ordinals[subscriber])
        ordinals[subscriber] += 1
        for action in reaction.actions { perform(action) }
        return reaction.demand
    }
}

/// Runs a script against a real `PassthroughPublisher` or `CurrentValuePublisher`, with `TrackingSubscriber`s.
final class LiveRun: Sendable {
    typealias Tracker = TrackingSubscriber<Int, TestError>

    private struct State {
        var trackers: [Tracker] = []
        var ordinals: [Int] = []
    }

    private let script: SubjectScript
    private let state = Locked(State())
    private let sendValue: @Sendable (Int) -> Void
    private let sendCompletion: @Sendable (Subscribers.Completion<TestError>) -> Void
    private let attach: @Sendable (Tracker) -> Void
    private let currentValue: @Sendable () -> Int?

    init(_ script: SubjectScript) {
        self.script = script
        switch script.kind {
        case .passthrough:
            let subject = PassthroughPublisher<Int, TestError>()
            sendValue = { subject.send($0) }
            sendCompletion = { subject.send(completion: $0) }
            attach = { subject.receive(subscriber: $0) }
            currentValue = { nil }
        case .currentValue(let initial):
            let subject = CurrentValuePublisher<Int, TestError>(initial)
            sendValue = { subject.send($0) }
            sendCompletion = { subject.send(completion: $0) }
            attach = { subject.receive(subscriber: $0) }
            currentValue = { subject.value }
        }
    }

    func run() -> ScriptOutcome {
        for step in script.steps { perform(step) }
        let trackers = state.withLock { $0.trackers }
        // Cancel what is still attached, so that no subscriber outlives the run through its subject.
        for tracker in trackers { tracker.cancel() }
        let traces = trackers.map { $0.history.map(\.modelEvent) }
        return ScriptOutcome(traces: traces, value: currentValue())
    }

    private func tracker(_ index: Int) -> Tracker? {
        state.withLock { state in index < state.trackers.count ? state.trackers[index] : nil }
    }

    private func perform(_ action: SubjectScript.Action) {
        switch action {
        case .subscribe(let demand):
            let tracker = state.withLock { state -> Tracker? in
                guard state.trackers.count < SubjectScript.maxSubscribers else { return nil }
                let index = state.trackers.count
                let tracker = Tracker(initialDemand: demand.asDemand) { [weak self] _ in
                    self?.react(index) ?? .none
                }
                state.trackers.append(tracker)
                state.ordinals.append(0)
                return tracker
            }
            if let tracker { attach(tracker) }
        case .send(let value):
            sendValue(value)
        case .request(let subscriber, let demand):
            tracker(subscriber)?.request(demand.asDemand)
        case .cancel(let subscriber):
            tracker(subscriber)?.cancel()
        case .finish:
            sendCompletion(.finished)
        case .fail(let code):
            sendCompletion(.failure(TestError(code: code)))
        }
    }

    private func react(_ subscriber: Int) -> Subscribers.Demand {
        let ordinal = state.withLock { state -> Int in
            defer { state.ordinals[subscriber] += 1 }
            return state.ordinals[subscriber]
        }
        let reaction = script.reaction(of: subscriber, ordinal: ordinal)
        for action in reaction.actions { perform(action) }
        return reaction.demand.asDemand
    }
}

extension TrackingSubscriber<Int, TestError>.Event {
    /// The model's name for this event.
    var modelEvent: SubjectModel.Event {
        switch self {
        case .subscribed: .subscribed
        case .value(let value): .value(value)
        case .completion(.finished): .finished
        case .completion(.failure(let error)): .failed(error.code)
        }
    }
}
