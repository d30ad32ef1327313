/// A plain, single-threaded reference model of FeedSync's two subjects, written from
/// `shared/COMBINE-SEMANTICS.md` (the spec), not from the engine in `Sources/FeedPublishers`.
///
/// It has no locks, atomics, versions or stack frames: subscribers are records in arrays, and a
/// re-entrant call from a subscriber's `onValue` is an ordinary nested call into the model.
/// `SubjectModelTests` runs the same scripts against it and against the real subjects.
///
/// Where the spec leaves a case open, the model's choice is marked **Choice** below.
final class SubjectModel {
    enum Kind: Equatable, CustomStringConvertible {
        case passthrough
        case currentValue(initial: Int)

        var description: String {
            switch self {
            case .passthrough: "passthrough"
            case .currentValue(let initial): "currentValue(\(initial))"
            }
        }
    }

    /// Demand as the spec counts it: a number of values, or unlimited.
    enum Demand: Equatable, CustomStringConvertible {
        case max(Int)
        case unlimited

        static let none = Demand.max(0)

        var isZero: Bool { self == .max(0) }

        static func + (lhs: Demand, rhs: Demand) -> Demand {
            switch (lhs, rhs) {
            case (.max(let a), .max(let b)): .max(a + b)
            default: .unlimited
            }
        }

        /// Takes one value's worth of demand; the caller has checked it is not zero.
        func minusOne() -> Demand {
            switch self {
            case .max(let count): .max(count - 1)
            case .unlimited: .unlimited
            }
        }

        var description: String {
            switch self {
            case .max(let count): "\(count)"
            case .unlimited: "∞"
            }
        }
    }

    /// What one subscriber sees, in order.
    enum Event: Equatable, CustomStringConvertible {
        case subscribed
        case value(Int)
        case finished
        case failed(Int)

        var description: String {
            switch self {
            case .subscribed: "sub"
            case .value(let value): "\(value)"
            case .finished: "finished"
            case .failed(let code): "failed(\(code))"
            }
        }
    }

    private final class Subscriber {
        let onValue: (Int) -> Demand
        var demand = Demand.none
        /// False after cancel or completion, and for a subscriber that arrived after completion.
        var live = true
        var trace: [Event] = []
        /// Current-value subject: owed the current value on its next `request` (spec: "behind").
        /// A new subscriber starts behind: its first demand brings the value current then.
        var behind = true
        /// Current-value subject: the number of the latest send this subscriber was offered
        /// (delivered or refused). It starts at the number of sends made before it subscribed,
        /// since those sends were not addressed to it.
        var offeredThrough: Int

        init(sendsBefore: Int, onValue: @escaping (Int) -> Demand) {
            offeredThrough = sendsBefore
            self.onValue = onValue
        }
    }

    let kind: Kind
    /// The current value (current-value subject only).
    private(set) var value: Int?
    private var completion: Event?
    /// Every subscriber ever attached, by index (the index a script uses to name it).
    private var subscribers: [Subscriber] = []
    /// The subscribers a `send` addresses, in subscription order (FeedSync's choice of order).
    private var current: [Subscriber] = []
    /// How many sends were accepted; the n-th accepted send has number n.
    private var sendCount = 0
    /// Current-value subject: the sends still in progress, outermost first (a nested send from
    /// inside `receive(_:)` sits above the send it is nested in).
    private var inProgress: [(number: Int, value: Int)] = []

    init(_ kind: Kind) {
        self.kind = kind
        if case .currentValue(let initial) = kind { value = initial }
    }

    private var replays: Bool { kind != .passthrough }

    /// The events subscriber `index` has seen.
    func trace(of index: Int) -> [Event] { subscribers[index].trace }

    var subscriberCount: Int { subscribers.count }

    // MARK: - The subject's side

    /// Attaches a subscriber that requests `initialDemand` on subscription; returns its index.
    @discardableResult
    func subscribe(initialDemand: Demand, onValue: @escaping (Int) -> Demand) -> Int {
        let subscriber = Subscriber(sendsBefore: sendCount, onValue: onValue)
        let index = subscribers.count
        subscribers.append(subscriber)
        subscriber.trace.append(.subscribed)
        // Spec: after completion a later subscriber gets a subscription whose request and cancel
        // do nothing, then the completion at once, and nothing else (not the current value).
        if let completion {
            subscriber.live = false
            subscriber.trace.append(completion)
            return index
        }
        current.append(subscriber)
        request(index, initialDemand)
        return index
    }

    func send(_ newValue: Int) {
        // Spec: after send(completion:), send is ignored (and a current value stays unchanged).
        guard completion == nil else { return }
        sendCount += 1
        let number = sendCount
        // Spec: send delivers to every *current* subscriber; one that subscribes during the
        // delivery is not among them.
        let addressed = current
        switch kind {
        case .passthrough:
            // Spec: each subscriber with demand gets the value at once; a nested send is
            // delivered at once too, so a subscriber served after the sender sees the nested
            // value before the outer one.
            // **Choice**: the spec's "every value, in send order" sentence is in its
            // CurrentValueSubject part; passthrough keeps this order, as OpenCombine does.
            for subscriber in addressed { offer(newValue, to: subscriber) }
        case .currentValue:
            value = newValue
            inProgress.append((number, newValue))
            defer { inProgress.removeLast() }
            for subscriber in addressed { serveInSendOrder(subscriber, through: number) }
        }
    }

    func send(completion newCompletion: Event) {
        guard completion == nil else { return }
        completion = newCompletion
        let addressed = current
        current = []
        // Spec: current subscribers get the completion once; a cancelled one gets nothing.
        for subscriber in addressed where subscriber.live {
            subscriber.live = false
            subscriber.trace.append(newCompletion)
        }
    }

    // MARK: - The subscription's side

    func request(_ index: Int, _ demand: Demand) {
        let subscriber = subscribers[index]
        // FeedSync's documented choice: request(.none) does nothing (OpenCombine traps).
        guard !demand.isZero, subscriber.live else { return }
        subscriber.demand = subscriber.demand + demand
        // Spec: a behind subscriber's request delivers the value current at that moment, at
        // once, inside request; the values in between are lost. Without a refusal since the
        // last delivery, request only adds demand.
        guard replays, subscriber.behind, let value else { return }
        subscriber.behind = false
        // **Choice** (spec silent): the catch-up counts as this subscriber's delivery of every
        // send up to now, including outer sends still in progress that have not reached it yet
        // ("the values in between are lost"), so it never gets a value older than this one, nor
        // this one twice. (OpenCombine 0.14 can deliver the same value again when an outer send
        // reaches it afterwards.)
        subscriber.offeredThrough = sendCount
        deliver(value, to: subscriber)
    }

    func cancel(_ index: Int) {
        let subscriber = subscribers[index]
        guard subscriber.live else { return }
        subscriber.live = false
        current.removeAll { $0 === subscriber }
    }

    // MARK: - Delivery

    /// Current-value subject: serves `subscriber` every send in progress up to `number` that it
    /// has not been offered yet, oldest first.
    ///
    /// Spec (last bullet): a value sent from inside another subscriber's `receive(_:)` does not
    /// replace an outer value still being delivered; a subscriber with demand that has not been
    /// served the outer value yet still receives it, and then the nested one: every subscriber
    /// with demand sees every value, in send order. So when a nested send reaches a subscriber
    /// that the outer send has not reached yet, the outer value goes first; when the outer send
    /// later reaches it, there is nothing left to offer.
    ///
    /// **Choice** (spec silent): a subscriber whose demand is zero when a pending outer value is
    /// offered to it this way refuses it then (and falls behind), exactly as if the outer send
    /// had reached it at that moment.
    private func serveInSendOrder(_ subscriber: Subscriber, through number: Int) {
        let pending = inProgress.filter { $0.number <= number }
        for send in pending where subscriber.live && send.number > subscriber.offeredThrough {
            subscriber.offeredThrough = send.number
            offer(send.value, to: subscriber)
        }
    }

    /// Spec: a subject takes one from the subscriber's demand before `receive(_:)`; a value sent
    /// while the demand is zero is not delivered (and marks a current-value subscriber behind).
    private func offer(_ value: Int, to subscriber: Subscriber) {
        guard subscriber.live else { return }  // spec: after cancel(), nothing more arrives
        guard !subscriber.demand.isZero else {
            if replays { subscriber.behind = true }
            return
        }
        subscriber.behind = false
        deliver(value, to: subscriber)
    }

    /// Takes one demand, calls the subscriber, adds what it returns (spec: returned demand does
    /// not catch up a behind subscriber; only `request` or the next `send` does).
    private func deliver(_ value: Int, to subscriber: Subscriber) {
        subscriber.demand = subscriber.demand.minusOne()
        subscriber.trace.append(.value(value))
        let more = subscriber.onValue(value)
        // A subscriber cancelled or completed inside its own receive keeps no demand; adding it
        // would change nothing it can observe.
        subscriber.demand = subscriber.demand + more
    }
}
