/// A key into ``DependencyValues`` that also has a live value, used by the real program.
///
/// ```swift
/// extension APIManager: DependencyKey {
///     static let liveValue = APIManager(search: { query in try await network.search(query) })
///     static let testValue = APIManager(search: { _ in ResultModel(items: []) })
/// }
/// ```
///
/// A key that does not declare `testValue` gets a default that reports an "unimplemented"
/// issue through ``DependencyValues/issueReporter`` the first time it is resolved in the
/// ``DependencyContext/test`` context (fatal unless a test installs a recording reporter), then
/// falls back to the live value. `previewValue` defaults to ``liveValue``.
public protocol DependencyKey: TestDependencyKey {
    /// The type of the value stored under this key; defaults to the key type itself.
    /// (Restated here so a key that declares only `liveValue` infers it from that.)
    associatedtype Value = Self

    /// The value handed out in the ``DependencyContext/live`` context when not overridden.
    static var liveValue: Value { get }
}

extension DependencyKey {
    /// By default a key with a live value previews with its live value.
    public static var previewValue: Value { liveValue }

    /// The default test value: reports that the key is unimplemented in tests, then returns
    /// ``liveValue``. Declare `testValue` on every key that tests may reach.
    public static var testValue: Value {
        DependencyValues.reportIssue(
            "Unimplemented dependency: '\(Self.self)' was used in the test context but declares no "
                + "testValue. Declare 'static var testValue' or override it with withDependencies."
        )
        return liveValue
    }
}
