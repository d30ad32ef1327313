public import Foundation

/// Produces ids: `@Dependency(\.uuid) var uuid; let id = uuid()`.
///
/// The test value is a fresh ``incrementing`` generator for each test context, so ids in tests
/// are `00000000-0000-0000-0000-000000000000`, `…-000000000001`, ….
public struct UUIDGenerator: Sendable {
    /// Makes each id.
    private let generate: @Sendable () -> UUID

    /// Creates a generator that calls `generate` for every id.
    public init(_ generate: @escaping @Sendable () -> UUID) {
        self.generate = generate
    }

    /// Returns a new id.
    public func callAsFunction() -> UUID {
        generate()
    }

    /// Random version-4 ids (`UUID()`).
    public static let live = UUIDGenerator { UUID() }

    /// Always returns `uuid`.
    public static func constant(_ uuid: UUID) -> UUIDGenerator {
        UUIDGenerator { uuid }
    }

    /// A new generator counting from `00000000-0000-0000-0000-000000000000`. Each read of this
    /// property starts a new counter; copies of one generator share theirs, so two calls
    /// through the same `@Dependency(\.uuid)` give two different ids.
    public static var incrementing: UUIDGenerator {
        let counter = SharedCounter()
        return UUIDGenerator { UUID(counting: counter.next()) }
    }
}

extension UUID {
    /// The id whose last 16 hex digits are `value` and the rest zero.
    fileprivate init(counting value: UInt64) {
        let b = withUnsafeBytes(of: value.bigEndian) { Array($0) }
        self.init(uuid: (0, 0, 0, 0, 0, 0, 0, 0, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]))
    }
}

extension UUIDGenerator: DependencyKey {
    /// Live: random ids.
    public static let liveValue = UUIDGenerator.live
    /// Test: a fresh ``incrementing`` generator (per test context, see ``DependencyValues/context``).
    public static var testValue: UUIDGenerator { .incrementing }
}

extension DependencyValues {
    /// The id generator; see ``UUIDGenerator``.
    public var uuid: UUIDGenerator {
        get { self[UUIDGenerator.self] }
        set { self[UUIDGenerator.self] = newValue }
    }
}
