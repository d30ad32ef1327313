import FeedSync
import FeedCore
import FeedDomain
import FeedPublishers
import FeedSQLiteBackend

/// Finds everything reachable from a value through `Mirror` that outside code could cast into something that sends:
/// a subject, an `EventPublisher`, a `Subscriber`, or a closure taking the element (or an array of it).
///
/// The walk sees what any code holding the value can see with `Mirror(reflecting:)`: every stored property
/// whatever its access level, superclasses' properties, optionals, collections, tuples and enum payloads,
/// recursively; each class instance once (by `ObjectIdentifier`), so cycles end. It cannot see — and so neither
/// can outside code — a closure's captures or the contents of `~Copyable` storage such as `Mutex` (a `Mirror`
/// shows it as `()`): that is where a sender may live.
///
/// ```swift
/// var walker = SenderReachability()            // detectors for the domain's public element types
/// walker.skip(FeedService.self)                // checked itself, not descended into
/// let report = walker.walk(subscriber, name: "subscriber")
/// #expect(report.findings.isEmpty, "\(report)")
/// #expect(!report.truncated)
/// ```
///
/// Add element types with `walker.detectors += SenderReachability.Detector.senders(of: MyState.self)`.
struct SenderReachability {
    /// A reachable value that outside code could cast into a sender.
    struct Finding: Hashable, CustomStringConvertible {
        /// Where it was reached, such as `subscriber.engine.some.subject`.
        let path: String
        /// What it can be cast to, such as `PassthroughPublisher<EventRecord, Never>`.
        let kind: String

        var description: String { "\(path): \(kind)" }
    }

    /// Recognises one castable sending type.
    struct Detector {
        /// The type it recognises, for reports.
        let kind: String
        /// Whether a value can be cast to that type.
        let matches: (Any) -> Bool
    }

    /// What a walk found.
    struct Report: CustomStringConvertible {
        /// Every castable sender, in walk order.
        var findings: [Finding] = []
        /// The paths of values matched by a skip rule (checked themselves, not descended into).
        var skipped: [String] = []
        /// How many values were visited.
        var visitedValues = 0
        /// How many distinct class instances were visited.
        var visitedObjects = 0
        /// Whether the depth or value limit stopped the walk somewhere (then it proves nothing there).
        var truncated = false

        var description: String {
            let found = findings.isEmpty ? "no sender" : findings.map(\.description).joined(separator: "\n  ")
            return "\(found)\n  (\(visitedValues) values, \(visitedObjects) objects, skipped: \(skipped), truncated: \(truncated))"
        }
    }

    /// The types looked for; the domain's public element types by default.
    var detectors: [Detector] = Detector.domain
    /// Values matched by one of these are checked themselves but not descended into.
    private(set) var skipRules: [(kind: String, matches: (Any) -> Bool)] = []
    /// Stops descending below this depth (the report is then marked truncated).
    var maximumDepth = 256
    /// Stops the walk after this many values (the report is then marked truncated).
    var maximumValues = 2_000_000

    /// Does not descend into values of type `T` (or subclasses, or conforming types).
    mutating func skip<T>(_ type: T.Type) {
        skipRules.append(("\(T.self)", { $0 is T }))
    }

    /// Does not descend into this very object.
    mutating func skip(_ object: AnyObject) {
        let identifier = ObjectIdentifier(object)
        skipRules.append(
            (
                "\(Swift.type(of: object)) instance",
                { value in
                    guard Swift.type(of: value) is AnyObject.Type else { return false }
                    return ObjectIdentifier(value as AnyObject) == identifier
                }
            ))
    }

    /// Walks everything reachable from `root`.
    func walk(_ root: Any, name: String = "root") -> Report {
        var walk = Walk(configuration: self)
        walk.visit(root, path: name, depth: 0)
        walk.report.visitedObjects = walk.visited.count
        return walk.report
    }

    private struct Walk {
        let configuration: SenderReachability
        var report = Report()
        var visited: Set<ObjectIdentifier> = []
        /// Keeps every visited object alive until the walk ends, so no identifier is reused by a new object.
        var retained: [AnyObject] = []

        mutating func visit(_ value: Any, path: String, depth: Int) {
            report.visitedValues += 1
            guard report.visitedValues <= configuration.maximumValues else {
                report.truncated = true
                return
            }
            let mirror = Mirror(reflecting: value)
            // `is` looks through optionals: check the payload, not the wrapper too, so each sender is reported once.
            if mirror.displayStyle != .optional {
                for detector in configuration.detectors where detector.matches(value) {
                    report.findings.append(Finding(path: path, kind: detector.kind))
                }
                if configuration.skipRules.contains(where: { $0.matches(value) }) {
                    report.skipped.append(path)
                    return
                }
            }
            if Swift.type(of: value) is AnyObject.Type {
                let object = value as AnyObject
                guard visited.insert(ObjectIdentifier(object)).inserted else { return }
                retained.append(object)
            }
            guard depth < configuration.maximumDepth else {
                if !mirror.children.isEmpty || mirror.superclassMirror != nil { report.truncated = true }
                return
            }
            var level: Mirror? = mirror
            while let current = level {
                for (index, child) in current.children.enumerated() {
                    let childPath = child.label.map { "\(path).\($0)" } ?? "\(path)[\(index)]"
                    visit(child.value, path: childPath, depth: depth + 1)
                }
                level = current.superclassMirror
            }
        }
    }
}

extension SenderReachability.Detector {
    /// Every way a value can send `T`s that a cast can recover: `PassthroughPublisher<T, Never>`,
    /// `CurrentValuePublisher<T, Never>`, `EventPublisher<T>`, `any Subscriber<T, Never>`, and closures taking `T`
    /// or `[T]`.
    ///
    /// Closures are matched in every form a cast distinguishes — plain, `@Sendable`, `async`, `@MainActor` — as
    /// throwing types, which non-throwing closures also cast to. Not matched: typed throws other than `any Error`,
    /// other global actors, `borrowing`/`consuming` parameters.
    static func senders<T: Sendable>(of type: T.Type) -> [Self] {
        func detector(_ kind: String, _ matches: @escaping (Any) -> Bool) -> Self { Self(kind: kind, matches: matches) }
        let name = "\(T.self)"
        return [
            detector("PassthroughPublisher<\(name), Never>") { $0 is PassthroughPublisher<T, Never> },
            detector("CurrentValuePublisher<\(name), Never>") { $0 is CurrentValuePublisher<T, Never> },
            detector("EventPublisher<\(name)>") { $0 is EventPublisher<T> },
            detector("any Subscriber<\(name), Never>") { $0 is any Subscriber<T, Never> },
            detector("(\(name)) -> Void") { $0 is (T) throws -> Void },
            detector("@Sendable (\(name)) -> Void") { $0 is @Sendable (T) throws -> Void },
            detector("(\(name)) async -> Void") { $0 is (T) async throws -> Void },
            detector("@Sendable (\(name)) async -> Void") { $0 is @Sendable (T) async throws -> Void },
            detector("@MainActor (\(name)) -> Void") { $0 is @MainActor (T) throws -> Void },
            detector("@MainActor (\(name)) async -> Void") { $0 is @MainActor (T) async throws -> Void },
            detector("([\(name)]) -> Void") { $0 is ([T]) throws -> Void },
            detector("@Sendable ([\(name)]) -> Void") { $0 is @Sendable ([T]) throws -> Void },
            detector("([\(name)]) async -> Void") { $0 is ([T]) async throws -> Void },
            detector("@Sendable ([\(name)]) async -> Void") { $0 is @Sendable ([T]) async throws -> Void },
            detector("@MainActor ([\(name)]) -> Void") { $0 is @MainActor ([T]) throws -> Void },
            detector("@MainActor ([\(name)]) async -> Void") { $0 is @MainActor ([T]) async throws -> Void },
        ]
    }

    /// Senders of the element types the domain hands out: `EventRecord`, `LikeEvent`, `FeedError`,
    /// `DurableSubscriber.Signal`, `FeedListProjection.State` and `PostDetailProjection.State`.
    static var domain: [Self] {
        senders(of: EventRecord.self) + senders(of: LikeEvent.self) + senders(of: FeedError.self)
            + senders(of: DurableSubscriber.Signal.self) + senders(of: FeedListProjection.State.self)
            + senders(of: PostDetailProjection.State.self)
    }
}
