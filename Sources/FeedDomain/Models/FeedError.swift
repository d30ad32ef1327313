public import FeedCore

/// An error from a FeedSync command or query: what was wrong, naming the value.
///
/// Data errors (unknown ids, invalid ids or text, duplicates) are distinct from database errors (cannot open,
/// busy, newer schema), so a front end can map them to different exit statuses. Values are shortened to 64
/// characters in descriptions: an error never echoes more of a user's data than needed to name it.
public enum FeedError: Error, Sendable, Hashable {
    /// No user has this id.
    case userNotFound(String)
    /// No post has this id.
    case postNotFound(String)
    /// A user with this id exists already.
    case userAlreadyExists(String)
    /// A post with this id exists already.
    case postAlreadyExists(String)
    /// An id or a text breaks the rules (empty, too long, forbidden characters).
    case invalidValue(field: String, value: String, reason: String)
    /// A page size outside `1...maximum`.
    case invalidLimit(Int, maximum: Int)
    /// The acting user may not do this: `userID` is not the author of the post `postID` it tried to delete.
    case forbidden(userID: String, postID: String)
    /// The database failed; the storage error says how.
    case storage(StorageError)
    /// The database file being followed was deleted or replaced by another file (its device and inode changed):
    /// the follower keeps reading the old file and would never see the new one's changes. Reopen to follow it.
    case databaseReplaced(path: String)
    /// An exclusive durable subscriber of this name runs elsewhere (another instance, process or machine); only one
    /// may hold the name at a time. Retry after it stopped.
    case subscriberTaken(String)
    /// The log no longer holds events the caller needs: it asked for the events after `after`, and those through
    /// `prunedThrough` were pruned (or, for a durable subscriber, likes were bulk-loaded without events when the log
    /// ended at `prunedThrough`). Rebuild from the tables, then continue from the log's head.
    case historyPruned(after: Int64, prunedThrough: Int64)
    /// The log no longer continues the history the caller followed: its position `after` is beyond the log's last
    /// seq, `head`, or the event at `after` is now a different event. A failover to a standby that lacked the last
    /// commits (asynchronous replication), or a restored backup, rewrote the log after some seq. Rebuild from the
    /// tables, then continue from the log's head, as for ``historyPruned(after:prunedThrough:)``.
    case historyRewritten(after: Int64, head: Int64)
    /// A durable subscriber's handler threw `error` on the event `seq`, or its rebuild threw it (`seq` is `nil`).
    /// The batch rolled back (transactional) or the cursor stayed before the event (at least once); `error` carries
    /// what the handler threw, as thrown.
    case handlerFailed(subscriber: String, seq: Int64?, error: HandlerError)
    /// The service was closed (``FeedService/close()``, or the end of ``FeedService/run()``): it runs no more
    /// commands or queries. Open a new one.
    case serviceClosed
    /// The task that made an async call was cancelled before the call started; nothing was read or written. A call
    /// that started runs to the end (a command to its `COMMIT`) and returns its result.
    case cancelled

    /// The broad kind of failure, for exit statuses and retry decisions.
    public enum Category: Sendable, Hashable {
        /// Bad data from the caller: unknown or invalid ids and text, duplicates, limits.
        case data
        /// The acting user may not do what it asked (``FeedError/forbidden(userID:postID:)``).
        case forbidden
        /// The database cannot be used: not a database, cannot open, read-only, newer schema.
        case database
        /// Another connection held a lock beyond the busy timeout, the server connection was lost, or a statement
        /// timed out; retrying later may succeed.
        case busy
        /// The log no longer holds what the caller asked for: rebuild from the tables (``FeedError/historyPruned(after:prunedThrough:)``).
        case historyPruned
        /// The application's own code that FeedSync ran failed (``FeedError/handlerFailed(subscriber:seq:error:)``).
        case handler
        /// The caller's task was cancelled before the call started (``FeedError/cancelled``); retrying in the same
        /// task fails the same way.
        case cancelled
    }

    /// The broad kind of this failure.
    public var category: Category {
        switch self {
        case .userNotFound, .postNotFound, .userAlreadyExists, .postAlreadyExists, .invalidValue, .invalidLimit: .data
        case .storage(.busy), .storage(.connectionLost), .storage(.timedOut), .storage(.notPrimary), .subscriberTaken: .busy
        case .storage(.constraintViolation), .storage(.userNotFound), .storage(.postNotFound),
            .storage(.userAlreadyExists), .storage(.postAlreadyExists):
            .data
        case .storage, .databaseReplaced, .serviceClosed: .database
        case .historyPruned, .historyRewritten: .historyPruned
        case .forbidden: .forbidden
        case .handlerFailed: .handler
        case .cancelled: .cancelled
        }
    }

    /// Maps a storage error to the domain's cases, attaching the offending value where the storage error lacks it.
    init(_ error: StorageError, value: String? = nil) {
        switch error {
        case .userNotFound(let id): self = .userNotFound(id)
        case .postNotFound(let id): self = .postNotFound(id)
        case .userAlreadyExists(let id): self = .userAlreadyExists(id)
        case .postAlreadyExists(let id): self = .postAlreadyExists(id)
        case .databaseReplaced(let path): self = .databaseReplaced(path: path)
        case .constraintViolation(let field, let reason): self = .invalidValue(field: field, value: value ?? "", reason: reason)
        default: self = .storage(error)
        }
    }

    /// Wraps any error thrown below the domain.
    public static func wrap(_ error: any Error, value: String? = nil) -> FeedError {
        switch error {
        case let error as FeedError: error
        case let error as StorageError: FeedError(error, value: value)
        default: .storage(.database(DatabaseFailure(backend: "FeedSync", code: "error", message: String(describing: error))))
        }
    }
}

extension FeedError: CustomStringConvertible {
    /// One line naming the problem and the value.
    public var description: String {
        switch self {
        case .userNotFound(let id): "no user \(FeedError.quoted(id))"
        case .postNotFound(let id): "no post \(FeedError.quoted(id))"
        case .userAlreadyExists(let id): "user \(FeedError.quoted(id)) exists already"
        case .postAlreadyExists(let id): "post \(FeedError.quoted(id)) exists already"
        case .invalidValue(let field, let value, let reason):
            value.isEmpty ? "invalid \(field): \(reason)" : "invalid \(field) \(FeedError.quoted(value)): \(reason)"
        case .invalidLimit(let limit, let maximum): "invalid limit \(limit): use 1 to \(maximum)"
        case .forbidden(let userID, let postID):
            "user \(FeedError.quoted(userID)) may not delete post \(FeedError.quoted(postID)): only its author may"
        case .storage(let error): error.description
        case .subscriberTaken(let name):
            "durable subscriber \(FeedError.quoted(name)) runs elsewhere; only one instance may hold the name at a time"
        case .databaseReplaced(let path):
            "the database file \(FeedError.quoted(path)) was deleted or replaced while it was followed; start again to follow the new file"
        case .historyPruned(let after, let prunedThrough):
            "the events after seq \(after) are no longer in the log (pruned through \(prunedThrough)); rebuild from the tables"
        case .historyRewritten(let after, let head):
            "the log was rewritten: seq \(after) is \(head < after ? "beyond its last seq, \(head)" : "now a different event (last seq \(head))") "
                + "after a failover or a restore; rebuild from the tables"
        case .handlerFailed(let subscriber, let seq?, let error):
            "durable subscriber \(FeedError.quoted(subscriber))'s handler failed on event \(seq): \(error)"
        case .handlerFailed(let subscriber, nil, let error):
            "durable subscriber \(FeedError.quoted(subscriber))'s rebuild failed: \(error)"
        case .serviceClosed: "the service is closed; open a new one"
        case .cancelled: "the call was cancelled before it started; nothing was done"
        }
    }

    /// `"value"`, shortened to 64 characters and with control characters escaped, so it is safe on a terminal.
    public static func quoted(_ value: String) -> String {
        var text = ""
        for scalar in value.unicodeScalars.prefix(64) {
            if scalar.properties.generalCategory == .control || scalar == "\"" || scalar == "\\" {
                text += scalar.escaped(asASCII: true)
            } else {
                text.unicodeScalars.append(scalar)
            }
        }
        if value.unicodeScalars.count > 64 { text += "…" }
        return "\"" + text + "\""
    }
}
