public import Foundation

/// Produces the current date: `@Dependency(\.date) var date; date()` or
/// `@Dependency(\.date.now) var now`.
///
/// The test value is ``constant(_:)`` of ``testReferenceDate``, so tests are deterministic in
/// time without any setup; override it with `withDependencies { $0.date.now = someDate }`.
public struct DateGenerator: Sendable {
    /// Makes each date.
    private var generate: @Sendable () -> Date

    /// Creates a generator that calls `generate` for every date.
    public init(_ generate: @escaping @Sendable () -> Date) {
        self.generate = generate
    }

    /// Returns the current date.
    public func callAsFunction() -> Date {
        generate()
    }

    /// The current date. Setting it replaces this generator with ``constant(_:)`` of the new
    /// value, which is how `withDependencies { $0.date.now = fixed }` pins time.
    public var now: Date {
        get { generate() }
        set { generate = { newValue } }
    }

    /// The system clock (`Date()`).
    public static let live = DateGenerator { Date() }

    /// Always returns `date`.
    public static func constant(_ date: Date) -> DateGenerator {
        DateGenerator { date }
    }

    /// Returns `start`, then `start + step`, `start + 2 × step`, …; the counter is shared by
    /// copies of the returned generator.
    public static func incrementing(from start: Date, by step: TimeInterval = 1) -> DateGenerator {
        let count = SharedCounter()
        return DateGenerator { start.addingTimeInterval(Double(count.next()) * step) }
    }

    /// The date handed out by the test value: 2024-01-01T00:00:00Z.
    public static let testReferenceDate = Date(timeIntervalSince1970: 1_704_067_200)
}

extension DateGenerator: DependencyKey {
    /// Live: the system clock.
    public static let liveValue = DateGenerator.live
    /// Test: always ``testReferenceDate``.
    public static let testValue = DateGenerator.constant(testReferenceDate)
}

extension DependencyValues {
    /// The date generator; see ``DateGenerator``.
    public var date: DateGenerator {
        get { self[DateGenerator.self] }
        set { self[DateGenerator.self] = newValue }
    }
}
