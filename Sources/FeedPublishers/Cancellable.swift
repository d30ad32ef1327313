/// A type whose activity or action can be cancelled.
///
/// Calling `cancel()` more than once is allowed and does nothing after the first call.
public protocol Cancellable {
    /// Cancels the activity; frees resources it holds.
    func cancel()
}
