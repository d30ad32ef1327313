internal import Foundation

/// Where FeedSync keeps its database by default.
public enum FeedPaths {
    /// The environment of this process.
    public static var processEnvironment: [String: String] { ProcessInfo.processInfo.environment }

    /// `$FEEDSYNC_DB`, else `$XDG_DATA_HOME/feedsync/feedsync.sqlite`, else
    /// `~/.local/share/feedsync/feedsync.sqlite` (home from `$HOME`).
    public static func defaultDatabasePath(environment: [String: String]) -> String {
        if let explicit = environment["FEEDSYNC_DB"], !explicit.isEmpty { return explicit }
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") {
            return data + "/feedsync/feedsync.sqlite"
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return home + "/.local/share/feedsync/feedsync.sqlite"
    }

    /// Creates the missing parent directories of `path` (mode 0700 for new ones).
    public static func createParentDirectory(of path: String) throws {
        let parent = (path as NSString).deletingLastPathComponent
        guard !parent.isEmpty else { return }
        try FileManager.default.createDirectory(
            atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    }
}
