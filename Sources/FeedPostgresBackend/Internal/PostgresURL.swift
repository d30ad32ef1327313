internal import CLibPQ
internal import Foundation

/// libpq connection URIs (`postgresql://user:password@host:port/database?param=value`): checking, redacting and
/// retargeting them.
enum PostgresURL {
    /// Whether `url` is a libpq URI (`postgresql://` or `postgres://`); key/value connection strings are refused.
    static func isAccepted(_ url: String) -> Bool {
        url.hasPrefix("postgresql://") || url.hasPrefix("postgres://")
    }

    /// The URI's parts: the scheme with `://`, the user information (before the last `@` ahead of the query), the
    /// host and path, and the query (without `?`).
    private struct Parts {
        var scheme: Substring
        var userInfo: Substring?
        var hostAndPath: Substring
        var query: Substring?

        init?(_ url: String) {
            guard let separator = url.range(of: "://") else { return nil }
            scheme = url[..<separator.upperBound]
            let rest = url[separator.upperBound...]
            let queryStart = rest.firstIndex(of: "?") ?? rest.endIndex
            var authority = rest[..<queryStart]
            if let at = authority.lastIndex(of: "@") {
                userInfo = authority[..<at]
                authority = authority[authority.index(after: at)...]
            }
            hostAndPath = authority
            query = queryStart < rest.endIndex ? rest[rest.index(after: queryStart)...] : nil
        }

        /// The query's `key=value` pairs, as written.
        var parameters: [Substring] {
            query.map { $0.split(separator: "&", omittingEmptySubsequences: false) } ?? []
        }

        static func key(of parameter: Substring) -> String {
            let key = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            return String(key).removingPercentEncoding ?? String(key)
        }

        static func value(of parameter: Substring) -> Substring {
            let parts = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return parts.count == 2 ? parts[1] : ""
        }

        var text: String {
            var text = String(scheme)
            if let userInfo { text += userInfo + "@" }
            text += hostAndPath
            if let query { text += "?" + query }
            return text
        }
    }

    /// `url` without any password: the user information keeps only the user name, and `password` query parameters
    /// are dropped. Any other place the password libpq would read still appears (a malformed URI) is masked `***`.
    static func redacted(_ url: String) -> String {
        guard isAccepted(url), var parts = Parts(url) else { return notAURL }
        var removed: Set<String> = []
        if let userInfo = parts.userInfo, let colon = userInfo.firstIndex(of: ":") {
            let password = String(userInfo[userInfo.index(after: colon)...])
            removed.insert(password.removingPercentEncoding ?? password)
            parts.userInfo = userInfo[..<colon]
        }
        if parts.query != nil {
            var kept: [Substring] = []
            for parameter in parts.parameters {
                if Parts.key(of: parameter) == "password" {
                    let value = String(Parts.value(of: parameter))
                    removed.insert(value.removingPercentEncoding ?? value)
                } else {
                    kept.append(parameter)
                }
            }
            parts.query = kept.isEmpty ? nil : Substring(kept.joined(separator: "&"))
        }
        var text = parts.text
        // A password libpq would read from somewhere else (a malformed URI) is masked wherever it still shows.
        for secret in libpqPasswords(url) where !secret.isEmpty && !removed.contains(secret) {
            text = text.replacingOccurrences(of: secret, with: "***")
            let encoded = secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? secret
            text = text.replacingOccurrences(of: encoded, with: "***")
        }
        return text
    }

    /// The strings that would reveal the password: as written in the URI (percent-encoded or not) and as libpq
    /// decodes it. Used to scrub messages.
    static func secrets(in url: String) -> [String] {
        var secrets = libpqPasswords(url)
        if let parts = Parts(url) {
            if let userInfo = parts.userInfo, let colon = userInfo.firstIndex(of: ":") {
                secrets.append(String(userInfo[userInfo.index(after: colon)...]))
            }
            for parameter in parts.parameters where Parts.key(of: parameter) == "password" {
                secrets.append(String(Parts.value(of: parameter)))
            }
        }
        let candidates = secrets.flatMap { [$0, $0.removingPercentEncoding ?? $0] }.filter { !$0.isEmpty }
        // Longest first, so that a secret containing another is replaced whole.
        return Array(Set(candidates)).sorted { $0.count > $1.count }
    }

    /// `url` pointing at database `name` (its path replaced, any `dbname` parameter dropped).
    static func replacingDatabase(_ url: String, with name: String) -> String {
        guard var parts = Parts(url) else { return url }
        let host = parts.hostAndPath.firstIndex(of: "/").map { parts.hostAndPath[..<$0] } ?? parts.hostAndPath
        parts.hostAndPath = host + "/" + name
        if parts.query != nil {
            let kept = parts.parameters.filter { Parts.key(of: $0) != "dbname" }
            parts.query = kept.isEmpty ? nil : Substring(kept.joined(separator: "&"))
        }
        return parts.text
    }

    /// The password(s) libpq reads from `url` (`PQconninfoParse`), decoded; empty when it has none or does not
    /// parse.
    private static func libpqPasswords(_ url: String) -> [String] {
        // Without libpq nothing can connect with `url`; the URL's own password forms are still found above.
        guard LibPQ.load() == nil else { return [] }
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(url, &error) else {
            if let error { PQfreemem(error) }
            return []
        }
        defer { PQconninfoFree(options) }
        var passwords: [String] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "password", let value = option.pointee.val {
                passwords.append(String(cString: value))
            }
            option += 1
        }
        return passwords
    }

    /// What stands for a string that is not a URI: nothing of it, since a key/value connection string may hold a
    /// password anywhere.
    static let notAURL = "(not a postgresql:// URL)"
}
