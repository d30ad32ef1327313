public import Foundation

/// Waits for work running on other threads while it makes progress: `wait(deadline)` (a semaphore's or a group's
/// `wait(timeout:)`) is asked again every half second, and the wait fails when `progress()` — a count the work raises
/// as it goes — has not risen for `stallAfter` seconds, or when the whole wait passes `limit`. A loaded CI machine
/// (every ThreadSanitizer suite at once) can slow a run far past any fixed bound without anything being stuck; a
/// stall is what a hang looks like. On failure it prints `label` and the progress reached; returns whether the wait
/// succeeded.
public func waitWhileProgressing(
    _ label: String, stallAfter: Double = 30, limit: Double = 600, progress: () -> Int,
    _ wait: (DispatchTime) -> DispatchTimeoutResult
) -> Bool {
    let start = DispatchTime.now()
    var lastProgress = progress()
    var lastChange = start
    while wait(.now() + 0.5) == .timedOut {
        let now = DispatchTime.now()
        let current = progress()
        if current != lastProgress {
            lastProgress = current
            lastChange = now
        }
        let stalled = Double(now.uptimeNanoseconds - lastChange.uptimeNanoseconds) / 1e9 >= stallAfter
        let overLimit = Double(now.uptimeNanoseconds - start.uptimeNanoseconds) / 1e9 >= limit
        if stalled || overLimit {
            print("\(label): \(stalled ? "no progress for \(stallAfter) s" : "over the \(limit) s limit") at progress \(current)")
            return false
        }
    }
    return true
}
