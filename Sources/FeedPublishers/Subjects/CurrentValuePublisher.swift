/// A publisher that holds a value, replays it to new subscribers and relays changes; the owner's side of ``ReadOnlyCurrentValuePublisher``.
///
/// Mirrors Combine's `CurrentValueSubject`. `send` stores the value and delivers it
/// synchronously on the sender's thread; after `send(completion:)`, `send` is ignored and
/// `value` keeps the last value.
///
/// ```swift
/// let count = CurrentValuePublisher<Int, Never>(0)
/// let token = count.sink { print($0) } // prints 0
/// count.send(count.value + 1)          // prints 1
/// ```
public final class CurrentValuePublisher<Element: Sendable, Failure: Error>:
    ReadOnlyCurrentValuePublisher<Element, Failure>, @unchecked Sendable
{
    // @unchecked: adds no stored state; see ReadOnlyCurrentValuePublisher (state behind SubjectCore's Mutex).

    /// Creates a publisher holding `initialValue`.
    ///
    /// - Parameter initialValue: The first current value.
    public override init(_ initialValue: Element) {
        super.init(initialValue)
    }

    /// Stores the value and delivers it to every current subscriber with demand, before returning.
    ///
    /// - Parameter value: The new value; ignored (and `value` unchanged) after completion.
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
