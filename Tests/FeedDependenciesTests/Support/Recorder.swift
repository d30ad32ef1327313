import FeedDependencies
import Synchronization

/// Collects values from any task, in arrival order.
final class Recorder<Element: Sendable>: Sendable {
    private let elements = Mutex<[Element]>([])

    /// Everything recorded so far.
    var history: [Element] { elements.withLock { $0 } }

    /// Appends `element`.
    func record(_ element: Element) {
        elements.withLock { $0.append(element) }
    }
}

extension Recorder where Element == String {
    /// A dependency issue reporter that records messages here instead of failing.
    var reporter: DependencyIssueReporter {
        DependencyIssueReporter { self.record($0) }
    }
}

/// Yields until `condition` holds or `limit` of real time has passed; returns whether it holds.
/// Never sleeps: it only gives other tasks the chance to run.
func eventually(
    within limit: Duration = .seconds(10),
    _ condition: () -> Bool
) async -> Bool {
    let clock = ContinuousClock()
    let deadline = clock.now.advanced(by: limit)
    while !condition() {
        if clock.now >= deadline { return false }
        await Task.yield()
    }
    return true
}
