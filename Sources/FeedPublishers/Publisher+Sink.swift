extension Publisher {
    /// Subscribes with closures for values and completion, requesting unlimited values.
    ///
    /// The closures run on the sender's thread, synchronously inside `send`.
    ///
    /// ```swift
    /// let token = publisher.sink(
    ///     receiveCompletion: { print("done: \($0)") },
    ///     receiveValue: { print($0) })
    /// ```
    ///
    /// - Returns: A cancellable that cancels the subscription when cancelled or deinitialized.
    public func sink(
        receiveCompletion: @escaping @Sendable (Subscribers.Completion<Failure>) -> Void,
        receiveValue: @escaping @Sendable (Output) -> Void
    ) -> AnyCancellable {
        let sink = Subscribers.Sink<Output, Failure>(receiveCompletion: receiveCompletion, receiveValue: receiveValue)
        receive(subscriber: sink)
        return AnyCancellable(sink)
    }
}

extension Publisher where Failure == Never {
    /// Subscribes with a closure for values, requesting unlimited values.
    ///
    /// ```swift
    /// let token = subject.sink { print($0) }
    /// ```
    ///
    /// - Returns: A cancellable that cancels the subscription when cancelled or deinitialized.
    public func sink(receiveValue: @escaping @Sendable (Output) -> Void) -> AnyCancellable {
        sink(receiveCompletion: { _ in }, receiveValue: receiveValue)
    }
}
