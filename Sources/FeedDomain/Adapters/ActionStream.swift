/// A delegate-style listener that receives a view's actions through one method (a view calls it for each user action).
public protocol ActionListener<Action>: AnyObject {
    /// The actions this listener receives.
    associatedtype Action
    /// Receives one action.
    func send(action: Action)
}

/// An adapter from delegate callbacks to an `AsyncSequence`: a view keeps it as its listener, and the code that handles
/// the actions consumes them with `for await`.
///
/// Hand the adapter to the action source as its (weak) listener; consume ``actions`` in a task. Actions arrive in
/// the order they were sent, none dropped. When the adapter is released — its source went away — the stream
/// finishes and the `for await` loop ends.
///
/// ```swift
/// let adapter = ActionStreamAdapter<ViewAction>()
/// view.listener = adapter
/// Task {
///     for await action in adapter.actions {
///         switch action { case .tapped: … case .refresh: … }
///     }
/// }
/// ```
public final class ActionStreamAdapter<Action: Sendable>: ActionListener, Sendable {
    /// The actions, in send order; finishes when the adapter is released or ``finish()`` is called.
    public let actions: AsyncStream<Action>
    private let continuation: AsyncStream<Action>.Continuation

    /// Creates an adapter with an unbounded buffer.
    public init() {
        (actions, continuation) = AsyncStream.makeStream(of: Action.self, bufferingPolicy: .unbounded)
    }

    deinit {
        continuation.finish()
    }

    /// Forwards an action to the stream.
    public func send(action: Action) {
        continuation.yield(action)
    }

    /// Ends the stream: actions sent later are dropped.
    public func finish() {
        continuation.finish()
    }
}
