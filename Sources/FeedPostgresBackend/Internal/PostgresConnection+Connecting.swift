internal import CLibPQ
internal import Foundation

extension PostgresConnection {
    /// libpq's TCP settings FeedSync applies unless the URI sets its own: keepalives after 10 s idle, every 5 s, the
    /// connection dropped after 3 unanswered (about 25 s), and `tcp_user_timeout` — how long sent data may stay
    /// unacknowledged before the kernel drops the connection — at the response timeout (or 30 s without one), so that
    /// a send blocked by a partition ends too. Both see only a peer whose host stops acknowledging; a vanished server
    /// behind a proxy is caught by the response timeout.
    static func tcpDefaults(responseTimeout: Duration?) -> [(keyword: String, value: String)] {
        let userTimeout = responseTimeout ?? .seconds(30)
        let millis = userTimeout.components.seconds * 1000 + userTimeout.components.attoseconds / 1_000_000_000_000_000
        return [
            ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
            ("tcp_user_timeout", String(max(1, millis))),
        ]
    }

    /// The `connect_timeout` in effect for a started connection (ours, or the URL's when it sets one), in whole
    /// seconds of at least 2 as libpq counts it; `nil` when none is set or it is 0 (no limit).
    static func connectTimeoutSeconds(of handle: OpaquePointer) -> Int64? {
        guard let options = PQconninfo(handle) else { return nil }
        defer { PQconninfoFree(options) }
        var option = options
        while let keyword = option.pointee.keyword {
            if String(cString: keyword) == "connect_timeout", let value = option.pointee.val {
                return Int64(String(cString: value)).map { $0 <= 0 ? nil : max(2, $0) } ?? nil
            }
            option += 1
        }
        return nil
    }

    /// Drives a connection started with `PQconnectStartParams` to its end, waiting in `poll(2)` for the socket
    /// libpq asks for; `false` when `timeout` passed first (with the asynchronous API libpq leaves `connect_timeout`
    /// to the caller: ``connectTimeoutSeconds(of:)``).
    ///
    /// Related documentation: <https://www.postgresql.org/docs/current/libpq-connect.html#LIBPQ-PQCONNECTSTARTPARAMS>
    static func completeConnection(_ handle: OpaquePointer, timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        var state = PGRES_POLLING_WRITING
        while PQstatus(handle) != CONNECTION_BAD, state != PGRES_POLLING_OK, state != PGRES_POLLING_FAILED {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { return false }
            let millis = remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000
            // The socket may change between polls (libpq tries the next address or host).
            var descriptor = pollfd(
                fd: PQsocket(handle), events: Int16(state == PGRES_POLLING_READING ? POLLIN : POLLOUT), revents: 0)
            let ready = poll(&descriptor, 1, Int32(clamping: max(1, millis)))
            if ready < 0, errno != EINTR { return true }  // PQconnectPoll reports the failure
            if ready == 0 { continue }
            state = PQconnectPoll(handle)
        }
        return true
    }
}

/// Calls `body` with NUL-terminated copies of `strings` followed by a `NULL` entry, as libpq's keyword arrays want.
func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
    return pointers.withUnsafeBufferPointer { buffer in
        // A non-empty array always has storage.
        guard let base = buffer.baseAddress else { preconditionFailure("an array of one or more elements has storage") }
        return body(base)
    }
}
