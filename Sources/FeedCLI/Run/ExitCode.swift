/// The exit statuses of `feedsync` (sysexits.h names where one fits).
public enum ExitCode: Int32, Sendable, CaseIterable {
    /// It worked.
    case success = 0
    /// `check` found at least one violation.
    case violations = 1
    /// `EX_USAGE`: unknown command or option, missing or malformed argument, out-of-range number.
    case usage = 64
    /// `EX_DATAERR`: unknown post or user, invalid id or text, duplicates, a non-empty database for `seed`.
    case data = 65
    /// `EX_IOERR`: the database cannot be opened, created or written, is not a database, or is newer.
    case database = 74
    /// `EX_TEMPFAIL`: the database stayed locked beyond the busy timeout; try again.
    case busy = 75
}
