#if canImport(Glibc)
    internal import Glibc
#elseif canImport(Darwin)
    internal import Darwin
#endif

/// The environment variables `feedsync` reads, looked up one by one with `getenv`.
///
/// Building the whole environment dictionary (`ProcessInfo.processInfo.environment`) at every start cost more
/// than opening the database; the CLI needs only these names.
enum ProcessEnvironment {
    /// Every variable the CLI reads (Docs/CLI.md, "Global options and environment", plus `TERM`).
    static let names = [
        "FEEDSYNC_DB", "FEEDSYNC_USER", "FEEDSYNC_TOKEN", "NO_COLOR", "TERM", "XDG_DATA_HOME", "HOME", "FEEDSYNC_BUSY_TIMEOUT_MS",
        "FEEDSYNC_RESPONSE_TIMEOUT_MS", "FEEDSYNC_LOG", PostgresHandOff.helperVariable, PostgresHandOff.markerVariable,
    ]

    /// The set ones among ``names``, with their values (invalid UTF-8 repaired, as `ProcessInfo` does).
    static func current() -> [String: String] {
        var environment: [String: String] = [:]
        for name in names {
            if let value = getenv(name) { environment[name] = String(cString: value) }
        }
        return environment
    }
}
