internal import Foundation

/// Where a FeedSync database is, and so which backend serves it: a path is SQLite; a `postgresql://` or
/// `postgres://` URL is PostgreSQL; any other `scheme://` is refused.
///
/// ```swift
/// let location = try FeedLocation("postgresql://app@db.example/feed")   // .postgreSQL
/// print(location)                                                      // the URL without a password
/// ```
public enum FeedLocation: Sendable, Hashable {
    /// A SQLite database file.
    case sqliteFile(path: String)
    /// A private in-memory SQLite database (`:memory:`).
    case sqliteInMemory
    /// A PostgreSQL database, by libpq connection URI (TLS and `.pgpass` as libpq provides them).
    case postgreSQL(url: String)

    /// Parses a location.
    ///
    /// - Throws: ``StorageError/unsupportedLocation(_:reason:)`` for an empty location or a URL of another scheme
    ///   (`mysql://…`, `http://…`), naming the schemes that are accepted.
    public init(_ text: String) throws(StorageError) {
        if text.isEmpty {
            throw StorageError.unsupportedLocation("\"\"", reason: "give a file path or a postgresql:// URL")
        }
        if text == ":memory:" {
            self = .sqliteInMemory
            return
        }
        if let scheme = Self.scheme(of: text) {
            switch scheme.lowercased() {
            case "postgresql", "postgres": self = .postgreSQL(url: text)
            default:
                throw StorageError.unsupportedLocation(
                    Self.redacted(text),
                    reason: "the scheme \(scheme):// names no FeedSync backend; use a file path (SQLite) or a "
                        + "postgresql:// URL")
            }
            return
        }
        self = .sqliteFile(path: text)
    }

    /// The scheme of `scheme://…`, or `nil` when the text is not a URL (a path such as `./a:b` or `/tmp/x`).
    static func scheme(of text: String) -> String? {
        guard let range = text.range(of: "://") else { return nil }
        let scheme = text[..<range.lowerBound]
        let allowed = { (scalar: Unicode.Scalar) in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "+-.".unicodeScalars.contains(scalar))
        }
        guard let first = scheme.unicodeScalars.first, first.properties.isAlphabetic, scheme.unicodeScalars.allSatisfy(allowed)
        else { return nil }
        return String(scheme)
    }

    /// A URL with its password (in the authority or as a `password=` parameter) replaced by nothing, fit to print.
    public static func redacted(_ url: String) -> String {
        guard let schemeEnd = url.range(of: "://") else { return url }
        var rest = String(url[schemeEnd.upperBound...])
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: "@") {
            let userInfo = authority[..<at]
            if let colon = userInfo.firstIndex(of: ":") {
                rest = String(userInfo[..<colon]) + String(rest[at...])
            }
        }
        if let query = rest.firstIndex(of: "?") {
            let parameters = rest[rest.index(after: query)...].split(separator: "&", omittingEmptySubsequences: false)
                .filter { !$0.lowercased().hasPrefix("password=") }
            rest = String(rest[..<query]) + (parameters.isEmpty ? "" : "?" + parameters.joined(separator: "&"))
        }
        return String(url[..<schemeEnd.upperBound]) + rest
    }
}

extension FeedLocation: CustomStringConvertible {
    /// The path, `:memory:`, or the URL without its password.
    public var description: String {
        switch self {
        case .sqliteFile(let path): path
        case .sqliteInMemory: ":memory:"
        case .postgreSQL(let url): Self.redacted(url)
        }
    }
}
