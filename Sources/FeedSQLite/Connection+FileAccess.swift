internal import CSQLite
internal import Foundation

extension Connection {
    /// The name to hand to `sqlite3_open_v2` for the file at `path`: a relative path gets a `./` prefix, so that
    /// SQLite never reads it as a URI (`file:…`, which this build's SQLite honours even without
    /// `SQLITE_OPEN_URI`) or as `:memory:`, and an empty path becomes `./`, which cannot be opened, instead of
    /// SQLite's private temporary database.
    static func literalFilename(_ path: String) -> String {
        path.hasPrefix("/") ? path : "./" + path
    }

    /// Creates `path` with mode 0600 if it does not exist, so SQLite (and its -wal/-shm files) inherit owner-only
    /// permissions. Failures are left for `sqlite3_open_v2` to report.
    static func createOwnerOnlyFileIfMissing(_ path: String) {
        let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        if descriptor >= 0 { Glibc.close(descriptor) }
    }

    /// What keeps this process from writing the database file at `path`, or `nil` when nothing does (or there is no
    /// file yet): the file's permissions (or a read-only file system), or — when there is no `-wal` file yet — its
    /// directory's, where SQLite must create the `-wal` and `-shm` files before anything can be written.
    ///
    /// Checked for the effective user, as `open(2)` checks (root passes unless the file system is read-only). A writer
    /// refuses such a file before `sqlite3_open_v2`, which would otherwise open it read-only without saying so and
    /// create `-wal` and `-shm` files with the database's read-only mode that it cannot remove again: a later writer,
    /// once the file is writable, would find that `-shm` read-only and fail.
    static func writeRefusal(path: String) -> String? {
        guard exists(path) else { return nil }
        if faccessat(AT_FDCWD, path, W_OK, AT_EACCESS) != 0 {
            return "the file is not writable (\(String(cString: strerror(errno))))"
        }
        if !exists(path + "-wal"), faccessat(AT_FDCWD, directory(of: path), W_OK | X_OK, AT_EACCESS) != 0 {
            return "its directory is not writable (\(String(cString: strerror(errno)))), and the -wal file must be created there"
        }
        return nil
    }

    /// Whether the file at `path` has no write-ahead log to read: no `-wal` file or an empty one, and no rollback
    /// `-journal` (which would be a hot journal to roll back). Then the database file alone holds every committed
    /// transaction: SQLite removes the `-wal` file, or empties it, only after copying all of it into the database.
    static func hasNoLogToRead(path: String) -> Bool {
        let noWAL = !exists(path + "-wal") || size(path + "-wal") == 0
        let noJournal = !exists(path + "-journal") || size(path + "-journal") == 0
        return noWAL && noJournal
    }

    /// The URI `sqlite3_open_v2` reads as the file at `path` opened with `immutable=1` (with `SQLITE_OPEN_URI`).
    ///
    /// The path is made absolute and every byte outside `A–Z a–z 0–9 - . _ ~ /` is percent-encoded, so no `?`, `#`
    /// or `%` in a file name is read as URI syntax; an empty authority (`file://` + `/…`) keeps a path that starts
    /// with `//` a path.
    ///
    /// Related SQLite documentation: <https://www.sqlite.org/uri.html>
    static func immutableURI(path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var encoded = ""
        for byte in absolute.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"), UInt8(ascii: "/"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                encoded += (hex.count == 1 ? "%0" : "%") + hex
            }
        }
        return "file://" + encoded + "?immutable=1"
    }

    private static func exists(_ path: String) -> Bool {
        access(path, F_OK) == 0
    }

    private static func size(_ path: String) -> Int {
        var info = stat()
        return stat(path, &info) == 0 ? Int(info.st_size) : 0
    }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
