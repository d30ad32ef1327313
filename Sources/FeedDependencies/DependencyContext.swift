/// The situation dependencies are resolved for; it picks which static value of a key a
/// ``DependencyValues`` hands out when the key has not been overridden.
///
/// There is no automatic detection of test runs: the default context is ``live``, and a test
/// opts into ``test`` explicitly (`withDependencies { $0.context = .test } operation: { … }`
/// or a test trait that does the same).
public enum DependencyContext: Sendable, Hashable, CaseIterable {
    /// The real program: keys resolve to `liveValue` (after values installed with
    /// ``DependencyValues/prepareLiveValues(_:)``).
    case live
    /// Previews and demo modes: keys resolve to `previewValue`.
    case preview
    /// Tests: keys resolve to `testValue`, which must be deterministic.
    case test
}
