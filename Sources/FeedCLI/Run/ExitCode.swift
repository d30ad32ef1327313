/// The exit statuses of `feedsync` (sysexits.h names where one fits).
public enum ExitCode: Int32, Sendable, CaseIterable {
    /// It worked.
    case success = 0
    /// `check` found at least one violation.
    case violations = 1
    /// `EX_USAGE`: unknown command or option, missing or malformed argument, out-of-range number.
    case usage = 64
    /// `EX_DATAERR`: unknown post or user, invalid id or text, duplicates, a non-empty database for `seed`, a sync the
    /// source refused (a replica whose account was erased).
    case data = 65
    /// `EX_NOINPUT`: the events asked for (`events --since SEQ`) are no longer in the log; they were pruned.
    case historyPruned = 66
    /// `EX_SOFTWARE`: application code the library ran failed (a durable subscriber's handler); feedsync's own
    /// commands run none.
    case software = 70
    /// `EX_IOERR`: the database cannot be opened, created or written, is not a database, or is newer.
    case database = 74
    /// `EX_TEMPFAIL`: the database stayed locked beyond the busy timeout, or the server was unreachable, or the call
    /// was cancelled before it started; try again.
    case busy = 75
    /// `EX_NOPERM`: the acting user may not do what it asked (deleting another user's post).
    case forbidden = 77
}
