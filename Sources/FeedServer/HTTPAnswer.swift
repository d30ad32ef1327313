package import FeedJSON
package import FeedSync

/// A complete answer to one request: status, headers and body, built on the connection's thread and handed to
/// libmicrohttpd, which copies the body.
package struct HTTPAnswer: Sendable {
    /// The HTTP status.
    package var status: UInt32
    /// Headers besides the ones libmicrohttpd adds (`Content-Length`, `Date`).
    package var headers: [(name: String, value: String)]
    /// The body's bytes.
    package var body: [UInt8]

    /// An answer with `Content-Type: application/json`.
    package static func json(_ status: UInt32, _ value: JSONValue) -> HTTPAnswer {
        HTTPAnswer(status: status, headers: [("Content-Type", "application/json")], body: Array(value.rendered.utf8))
    }

    /// `{"error": message, "code": code}`, the message kept to one line.
    package static func error(_ status: UInt32, code: String, _ message: String) -> HTTPAnswer {
        let line = String(message.map { $0.isNewline ? " " : $0 })
        return json(status, .object([("error", .string(line)), ("code", .string(code))]))
    }

    /// 401 `unauthorized`.
    package static func unauthorized(_ message: String) -> HTTPAnswer {
        var answer = error(401, code: "unauthorized", message)
        answer.headers.append(("WWW-Authenticate", "Bearer"))
        return answer
    }

    /// A ``FeedError`` as its status and code: unknown post or user 404, invalid value or limit 400, not the author 403, duplicates 409,
    /// pruned history 410, a busy or unreachable database (or a closing service) 503, anything else 500 — whose
    /// text, which may describe the database, goes to the log instead of the client.
    package static func feedError(_ error: FeedError) -> HTTPAnswer {
        switch error {
        case .postNotFound: return self.error(404, code: "postNotFound", error.description)
        case .userNotFound: return self.error(404, code: "userNotFound", error.description)
        case .invalidValue: return self.error(400, code: "invalidValue", error.description)
        case .invalidLimit: return self.error(400, code: "invalidLimit", error.description)
        case .postAlreadyExists: return self.error(409, code: "postAlreadyExists", error.description)
        case .userAlreadyExists: return self.error(409, code: "userAlreadyExists", error.description)
        case .historyPruned: return self.error(410, code: "historyPruned", error.description)
        case .historyRewritten: return self.error(410, code: "historyRewritten", error.description)
        case .forbidden: return self.error(403, code: "forbidden", error.description)
        case .serviceClosed: return unavailable("the server is stopping; retry on another or later", retryAfter: 1)
        default:
            if error.category == .busy { return unavailable("the database is busy or unreachable; retry later", retryAfter: 1) }
            return self.error(500, code: "internal", "the server failed to answer; its log says why")
        }
    }

    /// 503 with `code` (`unavailable` unless a budget names another) and, when given, `Retry-After: seconds`.
    package static func unavailable(_ message: String, code: String = "unavailable", retryAfter: Int? = nil) -> HTTPAnswer {
        var answer = error(503, code: code, message)
        if let retryAfter { answer.headers.append(("Retry-After", String(retryAfter))) }
        return answer
    }
}
