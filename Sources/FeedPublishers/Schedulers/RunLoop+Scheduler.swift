public import Foundation

extension RunLoop: Scheduler {
    /// Submits actions with `perform(_:)`; they run only while this run loop runs.
    ///
    /// - Important: `RunLoop.main` delivers only while the main run loop runs
    ///   (`RunLoop.main.run(until:)`, an app's event loop). A program parked in
    ///   `dispatchMain()` or an `async` main never runs it; use `DispatchQueue.main` there.
    public func makeEnqueuer() -> @Sendable (@escaping @Sendable () -> Void) -> Void {
        // RunLoop is not Sendable, but `perform(_:)` (CFRunLoopPerformBlock) is documented as
        // callable from any thread, which is the only use made of `loop` here.
        nonisolated(unsafe) let loop = self
        return { action in loop.perform(action) }
    }
}
