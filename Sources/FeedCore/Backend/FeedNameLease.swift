/// A name held by one holder at a time across every process (and machine) using a database: see
/// ``FeedBackend/tryHold(name:)``.
///
/// Released by ``release()`` or when the holder's process ends; releasing twice does nothing.
package protocol FeedNameLease: AnyObject, Sendable {
    /// Gives the name up.
    func release()
}
