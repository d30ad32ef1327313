internal import FeedSync

#if canImport(Glibc)
    import Glibc
#endif

/// Hands a command on a `postgresql://` location to the PostgreSQL-capable `feedsync` when this one cannot open it.
///
/// The install build that starts fastest is fully static (`-static-executable`: no dynamic loader, no shared
/// libraries), and a fully static program cannot load libpq. So that one installed `feedsync` still serves both
/// backends, such a build — or one without the package's `PostgreSQL` trait — *replaces itself* (`execv`) with the
/// PostgreSQL-capable build (`--static-swift-stdlib` only, which loads libpq on first use) when the location is
/// PostgreSQL: same arguments, same environment, same standard streams, before anything was opened or printed. The
/// helper is `FEEDSYNC_POSTGRES_HELPER` when that is set, else `feedsync-postgres` in the directory of this
/// program's own file (see `Docs/CLI.md`, "Install"). A SQLite command never looks for it.
///
/// The helper is started with `FEEDSYNC_HANDED_OFF=1`; a program that finds it set and still cannot open PostgreSQL
/// (a fully static build installed as the helper) fails with one line instead of handing off again. Only the
/// `feedsync` executable hands off (``FeedSyncCLI/run(rawArguments:environment:)``); in-process callers of
/// ``FeedSyncCLI/run(arguments:environment:)`` get the backend's own refusal.
enum PostgresHandOff {
    /// The helper's file name, looked for beside this program.
    static let helperName = "feedsync-postgres"
    /// Names the helper's path explicitly.
    static let helperVariable = "FEEDSYNC_POSTGRES_HELPER"
    /// Set in the helper's environment: it must not hand off again.
    static let markerVariable = "FEEDSYNC_HANDED_OFF"

    /// What a build without the package's `HTTP` trait lacks, for messages: `serve` is handed off too.
    static let noHTTP = "this feedsync was built without HTTP (the package's HTTP trait), so it cannot serve"
    /// What a build without the `HTTP` trait lacks for a replica of an `http(s)://` source: syncing is handed off too.
    static let noHTTPClient =
        "this feedsync was built without HTTP (the package's HTTP trait), so it cannot sync with an http(s):// source"

    /// Whether a replica's source is a server (`http://` or `https://`), which only a build with HTTP can reach.
    static func isHTTP(_ source: String) -> Bool {
        let lowered = source.lowercased()
        return lowered.hasPrefix("http://") || lowered.hasPrefix("https://")
    }

    /// What this build lacks, for messages.
    private static var postgreSQLLimitation: String {
        FeedBackends.hasPostgreSQL
            ? "this feedsync is a fully static build, which cannot load libpq"
            : "this feedsync was built without PostgreSQL"
    }

    /// Replaces this process with the helper, or throws the one-line reason it cannot (exit 74).
    ///
    /// - Parameters:
    ///   - arguments: the command line after the program name, passed on unchanged.
    ///   - environment: the variables this run reads (`FEEDSYNC_POSTGRES_HELPER`, `FEEDSYNC_HANDED_OFF`); the
    ///     helper inherits the process's own environment.
    ///   - limitation: what this build lacks (PostgreSQL by default; ``noHTTP`` for `serve`, ``noHTTPClient`` for a replica
    ///     of a server).
    static func handOff(arguments: [String], environment: [String: String], limitation: String? = nil) throws(CLIError) -> Never {
        let limitation = limitation ?? postgreSQLLimitation
        if environment[markerVariable] != nil {
            throw CLIError(
                "\(limitation), and it was started as another feedsync's PostgreSQL helper. Install the "
                    + "PostgreSQL-capable build (swift build -c release --static-swift-stdlib) as \(helperName).",
                exitCode: .database)
        }
        let configured = environment[helperVariable].flatMap { $0.isEmpty ? nil : $0 }
        guard let helper = configured ?? besideThisProgram() else {
            throw CLIError(
                "\(limitation), and found no \(helperName) beside it to run this command. Install the "
                    + "PostgreSQL-capable build (swift build -c release --static-swift-stdlib) as \(helperName) next to "
                    + "feedsync, or set \(helperVariable) to its path.",
                exitCode: .database)
        }
        guard access(helper, X_OK) == 0 else {
            let reason = String(cString: strerror(errno))
            throw CLIError(
                "\(limitation), and its PostgreSQL helper \(FeedError.quoted(helper)) cannot be run (\(reason)). "
                    + "Install the PostgreSQL-capable build there, or set \(helperVariable) to its path.",
                exitCode: .database)
        }
        setenv(markerVariable, "1", 1)
        let argv = ([helper] + arguments).map { strdup($0) } + [nil]
        execv(helper, argv)
        let reason = String(cString: strerror(errno))
        unsetenv(markerVariable)
        argv.forEach { free($0) }
        throw CLIError(
            "\(limitation), and its PostgreSQL helper \(FeedError.quoted(helper)) could not be started (\(reason)). "
                + "Install the PostgreSQL-capable build there, or set \(helperVariable) to its path.",
            exitCode: .database)
    }

    /// `feedsync-postgres` in the directory of this program's file (`/proc/self/exe`, links resolved), if it exists.
    private static func besideThisProgram() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard count > 0 else { return nil }
        let program = String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard let slash = program.lastIndex(of: "/") else { return nil }
        let candidate = program[..<slash] + "/" + helperName
        return access(candidate, F_OK) == 0 ? candidate : nil
    }
}
