internal import CLibPQLoader
internal import FeedCore

/// PostgreSQL's client library, loaded the first time FeedSync talks to PostgreSQL rather than when the program
/// starts (`CLibPQLoader`): from `FEEDSYNC_LIBPQ` (a file name or path) when that is set, else the system's
/// `libpq.so.5`. A program that only uses SQLite never loads it.
enum LibPQ {
    /// Loads libpq unless it is loaded already (thread-safe; the first outcome is kept).
    ///
    /// - Returns: `nil` when libpq is ready, otherwise the one-line reason with its fix.
    static func load() -> String? {
        var reason = [UInt8](repeating: 0, count: 512)
        let ready = reason.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { feedsync_libpq_load($0.baseAddress, $0.count) }
        }
        guard ready == 0 else { return nil }
        let length = reason.firstIndex(of: 0) ?? reason.count
        return String(decoding: reason[..<length], as: UTF8.self)
    }

    /// Whether this program can load libpq at all: `false` in a fully static executable, which ``load()`` refuses.
    static var isLoadable: Bool { feedsync_libpq_loadable() != 0 }

    /// Loads libpq, or throws the error that names the library and the fix.
    ///
    /// - Throws: ``StorageError/unsupportedLocation(_:reason:)`` when libpq cannot be loaded.
    static func require(location: String) throws(StorageError) {
        if let reason = load() { throw .unsupportedLocation(location, reason: reason) }
    }
}
