/// The key of the `continuousClock` dependency: `@Dependency(\.continuousClock) var clock`,
/// then `try await clock.sleep(for: .seconds(1))`.
///
/// Live: `ContinuousClock()`. Test: a fresh ``ImmediateClock`` per test context, so sleeps in
/// code under test return at once; a test that needs to control time installs a ``TestClock``
/// (`withDependencies { $0.continuousClock = testClock }`).
public enum ContinuousClockKey: DependencyKey {
    /// Live: the system's continuous clock.
    public static let liveValue: any Clock<Duration> = ContinuousClock()
    /// Test: an immediate clock, new for each test context.
    public static var testValue: any Clock<Duration> { ImmediateClock() }
}

extension DependencyValues {
    /// A clock that measures time continuously; see ``ContinuousClockKey``.
    public var continuousClock: any Clock<Duration> {
        get { self[ContinuousClockKey.self] }
        set { self[ContinuousClockKey.self] = newValue }
    }
}
