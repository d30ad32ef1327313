/// The set of dependencies visible to the current task: a value per key, overridable in a
/// scope with `withDependencies(_:operation:)`.
///
/// Expose a key as a property so it can be read with `@Dependency(\.apiManager)` and set with
/// `withDependencies { $0.apiManager = … }`:
///
/// ```swift
/// extension DependencyValues {
///     var apiManager: APIManager {
///         get { self[APIManager.self] }
///         set { self[APIManager.self] = newValue }
///     }
/// }
/// ```
///
/// A key is resolved in this order: a value set on this instance (an override); in the
/// ``DependencyContext/live`` context, a value installed with ``prepareLiveValues(_:)``; the
/// key's static value for ``context`` (`liveValue`, `previewValue` or `testValue`), computed
/// once and then shared by every copy of this instance until ``context`` changes. Sharing is
/// what makes a stateful default such as `UUIDGenerator.incrementing` count across reads.
public struct DependencyValues: Sendable {
    /// The values of the current task. Bound by `withDependencies(_:operation:)`;
    /// child tasks (`async let`, task groups, `Task { }`) inherit the binding, detached tasks
    /// see the unbound default (a fresh ``DependencyContext/live`` set).
    @TaskLocal public static var current = DependencyValues()

    /// Values set explicitly on this instance, keyed by `ObjectIdentifier(Key.self)`.
    private(set) var overrides: [ObjectIdentifier: any Sendable] = [:]

    /// Default values already resolved for ``context``; shared by copies.
    private var defaults: DefaultValueCache

    /// Which static value a key resolves to when it has not been overridden.
    ///
    /// Changing the context starts a fresh set of resolved defaults, so each test that sets
    /// `$0.context = .test` gets its own incrementing ids and its own immediate clock.
    /// Overrides already set on this instance are kept.
    public var context: DependencyContext {
        didSet {
            if context != oldValue { defaults = DefaultValueCache() }
        }
    }

    /// Creates an empty set of values (no overrides) for `context`.
    public init(context: DependencyContext = .live) {
        self.context = context
        self.defaults = DefaultValueCache()
    }

    /// The value for `key`: reading resolves it as described on ``DependencyValues``; writing
    /// overrides it on this instance only.
    public subscript<Key: TestDependencyKey>(key: Key.Type) -> Key.Value {
        get {
            let id = ObjectIdentifier(key)
            if let value = overrides[id], let typed = value as? Key.Value {
                return typed
            }
            if context == .live, let value = PreparedLiveValues.shared.value(for: id) as? Key.Value {
                return value
            }
            let resolved = defaults.value(for: id) {
                // Bind `current` to these values while computing the default, so a default that
                // itself reads dependencies (or reports an issue) sees this context.
                DependencyValues.$current.withValue(self) {
                    Self.staticValue(of: Key.self, in: context)
                }
            }
            if let typed = resolved as? Key.Value {
                return typed
            }
            // Unreachable: the cache only ever holds `Key.Value` under `Key`'s identifier.
            return Self.staticValue(of: Key.self, in: context)
        }
        set {
            overrides[ObjectIdentifier(key)] = newValue
        }
    }

    /// Reports `message` through the current ``issueReporter``.
    ///
    /// Use it in unimplemented test values of clients:
    /// `search: { _ in DependencyValues.reportIssue("APIManager.search"); throw CancellationError() }`.
    public static func reportIssue(_ message: String) {
        current.issueReporter.report(message)
    }

    /// The key's static value for `context`, bypassing overrides and the cache.
    private static func staticValue<Key: TestDependencyKey>(
        of key: Key.Type,
        in context: DependencyContext
    ) -> Key.Value {
        switch context {
        case .test:
            return Key.testValue
        case .preview:
            return Key.previewValue
        case .live:
            if let liveKey = key as? any DependencyKey.Type,
                let value = liveValue(of: liveKey) as? Key.Value
            {
                return value
            }
            current.issueReporter.report(
                "Dependency '\(Key.self)' has no liveValue and was used in the live context; "
                    + "using its testValue. Conform it to DependencyKey or install a live value "
                    + "with DependencyValues.prepareLiveValues."
            )
            return Key.testValue
        }
    }

    /// Opens a ``DependencyKey`` existential to read its live value.
    private static func liveValue<Key: DependencyKey>(of key: Key.Type) -> any Sendable {
        Key.liveValue
    }
}
