internal import FeedSync
internal import Foundation

/// Everything a running command needs: settings, the console, styling and how to open the database.
struct CommandContext: Sendable {
    /// The resolved options.
    let settings: Settings
    /// Where output goes.
    let console: Console
    /// The process environment.
    let environment: [String: String]
    /// Which streams are terminals.
    let terminal: TerminalInfo

    /// Styling for stdout.
    var style: Style { Style(enabled: settings.color) }

    /// The acting user; only called for commands whose spec requires one (checked in ``Settings``).
    var userID: String { settings.userID ?? "" }

    /// Opens the database as a service.
    ///
    /// - Parameter create: create (and migrate) a missing file; otherwise a missing file is an error that points
    ///   to `feedsync init`.
    func openService(create: Bool) throws(CLIError) -> FeedService {
        let path = settings.databasePath
        if !create, !FileManager.default.fileExists(atPath: path) {
            throw CLIError(
                "no database at \(FeedError.quoted(path)). Run 'feedsync init' to create it, or pass --db.",
                exitCode: .database)
        }
        if create {
            do {
                try FeedPaths.createParentDirectory(of: path)
            } catch {
                throw CLIError(
                    "cannot create the directory of \(FeedError.quoted(path)). Check its permissions, or pass --db.",
                    exitCode: .database)
            }
        }
        do {
            return try FeedService(path: path, configuration: configuration)
        } catch {
            throw CLIError(error)
        }
    }

    /// The connection options: the default 5 s busy timeout, or `FEEDSYNC_BUSY_TIMEOUT_MS`.
    var configuration: Configuration {
        var configuration = Configuration()
        if let text = environment["FEEDSYNC_BUSY_TIMEOUT_MS"], let millis = Int(text), millis >= 0 {
            configuration.busyMode = .timeout(.milliseconds(millis))
        }
        return configuration
    }
}
