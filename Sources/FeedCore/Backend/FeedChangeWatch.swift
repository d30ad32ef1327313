/// Tells a change feed when other processes (or machines) may have committed to the database.
///
/// Used by one thread at a time (the change feed's), except ``wake()``, which any thread may call.
package protocol FeedChangeWatch: AnyObject, Sendable {
    /// Whether the database may have changed since the previous call (`true` on the first call).
    ///
    /// - Throws: ``StorageError`` — among them `databaseReplaced(path:)` when the file being watched was deleted
    ///   or replaced, after which the watch is useless.
    func poll() throws -> Bool
    /// Waits until a change may have happened, `timeout` passed, or ``wake()`` was called.
    func wait(timeout: Duration) -> FeedChangeWake
    /// Ends a ``wait(timeout:)`` in progress (or the next one) at once.
    func wake()
    /// Releases the watch's resources (a connection, a file descriptor).
    func close()
    /// The delays of the re-checks after a sign of a change, each counted from the previous check: needed where a
    /// sign can come before its commit is visible, none where it is sent only after the commit.
    var recheckDelays: [Duration] { get }
}

/// Why ``FeedChangeWatch/wait(timeout:)`` returned.
package enum FeedChangeWake: Sendable, Hashable {
    /// The backend saw a sign of a change (a file notification, a `NOTIFY`).
    case changed
    /// The timeout passed.
    case timedOut
    /// ``FeedChangeWatch/wake()`` was called.
    case woken
}
