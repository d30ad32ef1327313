/// A publisher that relays sent values to its current subscribers; the owner's side of ``ReadOnlyPassthroughPublisher``.
///
/// Mirrors Combine's `PassthroughSubject`: no value is stored, a subscriber without demand
/// misses a value, `send` after `send(completion:)` is ignored.
///
/// ```swift
/// let subject = PassthroughPublisher<Int, Never>()
/// let token = subject.sink { print($0) }
/// subject.send(1) // prints 1 before send returns
/// ```
public final class PassthroughPublisher<Element: Sendable, Failure: Error>:
    ReadOnlyPassthroughPublisher<Element, Failure>, @unchecked Sendable
{
    // @unchecked: adds no stored state; see ReadOnlyPassthroughPublisher (state behind SubjectCore's Mutex).

    /// Creates a publisher with no subscribers.
    public override init() {
        super.init()
    }

    /// Delivers a value to every current subscriber with demand, on this thread, before returning.
    ///
    /// - Parameter value: The value to send; ignored after completion.
    @inlinable
    public func send(_ value: Element) {
        core.send(value)
    }

    /// Sends the completion to every current subscriber once; later sends are ignored.
    ///
    /// - Parameter completion: `.finished` or `.failure(error)`.
    public func send(completion: Subscribers.Completion<Failure>) {
        core.send(completion: completion)
    }
}

extension PassthroughPublisher where Element == Void {
    /// Sends `()`.
    public func send() {
        send(())
    }
}
