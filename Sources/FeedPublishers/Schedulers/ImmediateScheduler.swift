/// A scheduler that runs every action at once, on the calling thread.
///
/// `receive(on: ImmediateScheduler.shared)` changes nothing about threads; useful in tests.
public struct ImmediateScheduler: Scheduler, Sendable {
    /// The shared instance.
    public static let shared = ImmediateScheduler()

    /// Creates the scheduler.
    public init() {}

    /// Returns a function that runs the action immediately.
    public func makeEnqueuer() -> @Sendable (@escaping @Sendable () -> Void) -> Void {
        { action in action() }
    }
}
