/// Cancels the iterator's subscription when the iterator (the last copy) goes away.
final class ValuesLifetime: Sendable {
    private let onDeinit: @Sendable () -> Void

    init(_ onDeinit: @escaping @Sendable () -> Void) {
        self.onDeinit = onDeinit
    }

    deinit {
        onDeinit()
    }
}
