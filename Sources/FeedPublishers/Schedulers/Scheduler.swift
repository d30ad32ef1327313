/// Something that can run actions later, in the order they were submitted: the target of `receive(on:)`.
///
/// Conformers: `DispatchQueue` (serial queues keep order), `RunLoop` (delivers only while
/// that run loop runs), and ``ImmediateScheduler``.
public protocol Scheduler {
    /// Returns a thread-safe function that submits an action to this scheduler.
    ///
    /// `receive(on:)` keeps only this function, so a scheduler that is not `Sendable`
    /// (such as `RunLoop`) can still be the target.
    func makeEnqueuer() -> @Sendable (@escaping @Sendable () -> Void) -> Void
}

extension Scheduler {
    /// Submits one action.
    ///
    /// - Parameter action: The work to run on this scheduler.
    public func schedule(_ action: @escaping @Sendable () -> Void) {
        makeEnqueuer()(action)
    }
}
