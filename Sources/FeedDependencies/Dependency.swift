/// Reads a dependency: `@Dependency(\.uuid) var uuid`, `@Dependency(\.date.now) var now`,
/// `@Dependency(APIManager.self) var api`.
///
/// The wrapper captures ``DependencyValues/current`` when it is initialized — usually when the
/// feature or model that declares it is created — and reads the key path from those captured
/// values on every access. So a feature created inside `withDependencies { … }` keeps using the
/// overrides of that scope even when its methods run later, elsewhere; and a nested key path
/// such as `\.date.now` is evaluated on each access (live: the current time).
@propertyWrapper
public struct Dependency<Value>: Sendable {
    /// The values captured at initialization.
    private let values: DependencyValues
    /// Reads the value from the captured values.
    private let read: @Sendable (DependencyValues) -> Value

    /// Reads `keyPath` (which may be nested, like `\.date.now`) from the values current at
    /// initialization.
    public init(_ keyPath: any KeyPath<DependencyValues, Value> & Sendable) {
        self.values = DependencyValues.current
        self.read = { $0[keyPath: keyPath] }
    }

    /// Reads the value stored under `key` from the values current at initialization.
    public init<Key: TestDependencyKey & SendableMetatype>(_ key: Key.Type) where Key.Value == Value {
        self.values = DependencyValues.current
        self.read = { $0[Key.self] }
    }

    /// The dependency's value, resolved from the captured values.
    public var wrappedValue: Value {
        read(values)
    }
}
