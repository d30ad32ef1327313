/// A key into ``DependencyValues`` that declares the values used in tests and previews.
///
/// Declare a key with only this protocol in an interface module that must not know the live
/// implementation; the module that owns the implementation adds the ``DependencyKey``
/// conformance (with `liveValue`) later, for example at the program's entry point.
public protocol TestDependencyKey {
    /// The type of the value stored under this key. Defaults to the key type itself, so a
    /// client struct can be its own key (`extension APIManager: DependencyKey`).
    associatedtype Value: Sendable = Self

    /// The value handed out in the ``DependencyContext/test`` context when not overridden.
    ///
    /// Test values must be deterministic (fixed dates, incrementing ids, clocks that only move
    /// when told).
    static var testValue: Value { get }

    /// The value handed out in the ``DependencyContext/preview`` context when not overridden.
    /// Defaults to ``testValue`` (or to `liveValue` for a ``DependencyKey``).
    static var previewValue: Value { get }
}

extension TestDependencyKey {
    /// By default a key without a live value previews with its test value.
    public static var previewValue: Value { testValue }
}
