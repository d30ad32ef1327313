public import Foundation
import Dispatch

extension RunLoop: Scheduler {
    /// Submits actions to this run loop, in order; `RunLoop.main` goes through the main dispatch queue.
    ///
    /// For `RunLoop.main` the actions are enqueued on `DispatchQueue.main`, which the main run
    /// loop drains while it runs (an app's event loop, `RunLoop.main.run(until:)`) and which
    /// `dispatchMain()` or an `async` main also drain; so they run on the main actor. On Linux
    /// `dispatchMain()` (used by `swift test`) retires the main thread, and blocks given to
    /// `RunLoop.main.perform` would never run there: this is why the main loop is not fed
    /// through `perform`.
    ///
    /// - Important: Any other run loop gets the actions through `perform(_:)` and runs them
    ///   only while that run loop runs, on its thread.
    public func makeEnqueuer() -> @Sendable (@escaping @Sendable () -> Void) -> Void {
        if self === RunLoop.main {
            return { action in DispatchQueue.main.async(execute: action) }
        }
        // RunLoop is not Sendable, but `perform(_:)` (CFRunLoopPerformBlock) may be called from
        // any thread, which is the only use made of `loop` here.
        nonisolated(unsafe) let loop = self
        return { action in loop.perform(action) }
    }
}
