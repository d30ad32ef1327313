public import Dispatch

extension DispatchQueue: Scheduler {
    /// Submits actions with `async`; a serial queue runs them in submission order.
    public func makeEnqueuer() -> @Sendable (@escaping @Sendable () -> Void) -> Void {
        { [self] action in self.async(execute: action) }
    }
}
