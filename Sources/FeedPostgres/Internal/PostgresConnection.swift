internal import CLibPQ
internal import FeedCore
internal import Foundation

/// A failure reported by libpq or the server, before it is mapped to a ``StorageError``.
///
/// The message is already scrubbed: it holds neither the password nor a bound value (see
/// ``PostgresConnection/scrub(_:sqlState:parameters:secrets:)``).
struct PostgresFailure: Error {
    /// The server's five-character SQLSTATE; `nil` when the failure came from the connection itself (no server
    /// answer).
    let sqlState: String?
    /// The primary message.
    let message: String
    /// The constraint concerned (`PG_DIAG_CONSTRAINT_NAME`), if any.
    let constraint: String?
    /// The table concerned (`PG_DIAG_TABLE_NAME`), if any.
    let table: String?
    /// The statement text (with its placeholders), if a statement failed.
    let sql: String?
    /// Whether the connection can no longer be used.
    let connectionBroken: Bool
    /// Whether the failure was found before anything was sent (so an open transaction is not aborted by it).
    let beforeSending: Bool
    /// Whether the client gave up waiting for the server's answer (the connection's response timeout passed) and
    /// closed the connection: the peer may be gone without a trace (a partition, a dead host), so an immediate
    /// retry would likely wait as long again.
    let noAnswer: Bool

    init(
        sqlState: String?, message: String, constraint: String? = nil, table: String? = nil, sql: String? = nil,
        connectionBroken: Bool, beforeSending: Bool = false, noAnswer: Bool = false
    ) {
        self.sqlState = sqlState
        self.message = message
        self.constraint = constraint
        self.table = table
        self.sql = sql
        self.connectionBroken = connectionBroken
        self.beforeSending = beforeSending
        self.noAnswer = noAnswer
    }

    /// The failure as a backend-neutral database failure.
    var databaseFailure: DatabaseFailure {
        DatabaseFailure(backend: PostgresBackend.name, code: sqlState ?? "08006", message: message, sql: sql)
    }

    /// Whether retrying the whole transaction may cure it: a serialization failure or a deadlock.
    var isRetryable: Bool { sqlState == "40001" || sqlState == "40P01" }
}

/// One libpq connection (`PGconn`), used by one thread at a time.
///
/// Statements go through ``execute(_:_:prepared:)``: fixed queries are prepared once per connection
/// (`PQsendPrepare`/`PQsendQueryPrepared`), other SQL runs with `PQsendQueryParams`; every value is a bound
/// parameter. Results are in text format unless a caller asks for binary ones (the feed page statements).
///
/// Every round trip has a deadline, ``responseTimeout``: the connection waits for the server's answer in `poll(2)`
/// and, when none came in time, closes itself and fails with ``PostgresFailure/noAnswer``. TCP keepalives cannot
/// see a peer that vanished behind a proxy, a NAT or a load balancer (the local end keeps acknowledging while
/// nothing reaches the server), and libpq's blocking calls would wait for as long as the kernel keeps the socket.
final class PostgresConnection {
    /// The `PGconn *`; `nil` once closed.
    private var handle: OpaquePointer?
    /// The longest wait for the server's answer to one round trip; `nil` waits as long as the socket lives.
    var responseTimeout: Duration?
    /// Round trips the server answered (with rows, a status or an error of its own); not counted: failures of the
    /// connection itself. The pool compares it before and after a call to tell whether the server saw any of it.
    private(set) var answeredRoundTrips = 0
    /// Whether the connection was closed because the server did not answer within ``responseTimeout``.
    private(set) var gaveUpWaiting = false
    /// Prepared statement names by SQL text.
    private var prepared: [String: String] = [:]
    /// The statements prepared last, looked up by where their text is stored before `prepared` hashes the whole text
    /// (a feed page's statement is ~500 bytes: hashing and comparing it cost ~6,000 instructions a page).
    private var recentlyPrepared = RecentStatements()
    /// Strings that must never appear in a message (the password, raw and percent-encoded).
    private let secrets: [String]

    private init(handle: OpaquePointer, secrets: [String], responseTimeout: Duration?) {
        self.handle = handle
        self.secrets = secrets
        self.responseTimeout = responseTimeout
    }

    deinit { close() }

    /// Opens a connection to the libpq URI `url`.
    ///
    /// The URI's own parameters (host, TLS `sslmode`, `.pgpass`, …) are libpq's; `connect_timeout` and the TCP
    /// settings of ``tcpDefaults(responseTimeout:)`` apply unless the URI sets them, and `application_name` and
    /// `client_encoding` are always FeedSync's. After connecting it sets `statement_timeout` and
    /// `default_transaction_read_only` (transactions that write say `READ WRITE`, so a statement outside a write
    /// transaction cannot write).
    ///
    /// - Parameter responseTimeout: the deadline of every round trip (``responseTimeout``), the first included.
    /// - Throws: ``PostgresFailure`` with `connectionBroken` when the server cannot be reached or refuses.
    static func open(
        url: String, applicationName: String, connectTimeout: Duration, statementTimeout: Duration?, readOnlyByDefault: Bool,
        responseTimeout: Duration? = PostgresOptions().responseTimeout
    ) throws(PostgresFailure) -> PostgresConnection {
        // `PostgresBackend.connect` reports a missing libpq as `unsupportedLocation` before this is reached.
        if let reason = LibPQ.load() {
            throw PostgresFailure(sqlState: "08001", message: reason, sql: nil, connectionBroken: true, beforeSending: true)
        }
        let secrets = PostgresURL.secrets(in: url)
        // libpq applies keywords in order, the last value winning: the timeout can be overridden by the URI (which
        // `dbname` expands), the application name and encoding cannot.
        let tcp = tcpDefaults(responseTimeout: responseTimeout)
        let keywords = ["connect_timeout"] + tcp.map(\.keyword) + ["dbname", "application_name", "client_encoding"]
        let values = [String(max(2, connectTimeout.components.seconds))] + tcp.map(\.value) + [url, applicationName, "UTF8"]
        // Connect without blocking inside libpq, so that the notice receiver is in place before the server says
        // anything: a server shutting down sends `WARNING: terminating connection …` during the handshake, which
        // libpq's default receiver would print to stderr (a second line under the CLI's one-line error).
        let handle = withCStrings(keywords) { keywordPointers in
            withCStrings(values) { valuePointers in PQconnectStartParams(keywordPointers, valuePointers, 1) }
        }
        guard let handle else {
            throw PostgresFailure(
                sqlState: nil, message: "out of memory", constraint: nil, table: nil, sql: nil, connectionBroken: true)
        }
        // Notices (`relation … already exists, skipping`) are not errors; libpq would print them to stderr.
        PQsetNoticeReceiver(handle, { _, _ in }, nil)
        // No `connect_timeout` (or 0) means wait indefinitely, as libpq does.
        let timeout: Duration = Self.connectTimeoutSeconds(of: handle).map { .seconds($0) } ?? .seconds(Int64(Int32.max))
        let timedOut = !completeConnection(handle, timeout: timeout)
        guard !timedOut, PQstatus(handle) == CONNECTION_OK else {
            let message =
                timedOut ? "timeout expired while connecting" : scrub(String(cString: PQerrorMessage(handle)), secrets: secrets)
            PQfinish(handle)
            throw PostgresFailure(
                sqlState: nil, message: message.trimmingCharacters(in: .whitespacesAndNewlines), constraint: nil, table: nil,
                sql: nil, connectionBroken: true)
        }
        let connection = PostgresConnection(handle: handle, secrets: secrets, responseTimeout: responseTimeout)
        var settings: [DatabaseValue] = []
        var sql = "SELECT 1"
        if let statementTimeout {
            let millis = statementTimeout.components.seconds * 1000 + statementTimeout.components.attoseconds / 1_000_000_000_000_000
            sql += ", set_config('statement_timeout', $1, false)"
            // 0 would switch the timeout off: a positive duration is at least a millisecond.
            settings.append(.text(String(statementTimeout > .zero ? max(1, millis) : 0)))
        }
        if readOnlyByDefault { sql += ", set_config('default_transaction_read_only', 'on', false)" }
        _ = try connection.execute(sql, settings)
        return connection
    }

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
    private static func connectTimeoutSeconds(of handle: OpaquePointer) -> Int64? {
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
    private static func completeConnection(_ handle: OpaquePointer, timeout: Duration) -> Bool {
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

    /// Whether the connection is unusable (closed, or libpq reports `CONNECTION_BAD`).
    var isBroken: Bool {
        guard let handle else { return true }
        return PQstatus(handle) != CONNECTION_OK
    }

    /// Whether an idle connection turned out to be gone: its socket became readable while nothing was asked (the
    /// server closed it, reset it, or sent a fatal message before it went), and libpq, reading what came without
    /// blocking, finds it broken. A quiet socket is taken as alive: a peer that vanished silently is found by the
    /// next round trip's deadline.
    func isGoneWhileIdle() -> Bool {
        guard let handle else { return true }
        var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return PQstatus(handle) != CONNECTION_OK }
        if descriptor.revents & Int16(POLLERR | POLLHUP | POLLNVAL) != 0 { return true }
        return PQconsumeInput(handle) == 0 || PQstatus(handle) != CONNECTION_OK
    }

    /// Whether the connection is idle outside any transaction (fit to be reused by someone else).
    var isIdle: Bool {
        guard let handle else { return false }
        return PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    /// The server process id serving this connection.
    var backendPID: Int32 {
        guard let handle else { return 0 }
        return PQbackendPID(handle)
    }

    /// Closes the connection (idempotent).
    func close() {
        if let handle { PQfinish(handle) }
        handle = nil
        prepared.removeAll()
        recentlyPrepared = RecentStatements()
    }

    // MARK: - Statements

    /// Runs one statement with bound parameters and returns its result.
    ///
    /// - Parameters:
    ///   - sql: one statement; placeholders `$1`, `$2`, ….
    ///   - parameters: the values, bound in text format (blobs in binary).
    ///   - prepared: prepare the statement once on this connection and reuse it (for FeedSync's fixed queries).
    /// - Throws: ``PostgresFailure``.
    @discardableResult
    func execute(
        _ sql: String, _ parameters: [DatabaseValue] = [], prepared usePrepared: Bool = false, binaryResults: Bool = false
    ) throws(PostgresFailure) -> PostgresResult {
        guard let handle else { throw closedFailure(sql: sql) }
        for (index, parameter) in parameters.enumerated() {
            // libpq reads text parameters up to their first NUL: refuse rather than send a truncated value.
            if case .text(let text) = parameter, text.utf8.contains(0) {
                throw PostgresFailure(
                    sqlState: "22021", message: "text parameter $\(index + 1) contains a NUL character, which PostgreSQL text cannot hold",
                    sql: sql, connectionBroken: false, beforeSending: true)
            }
        }
        let statementName: String?
        if usePrepared {
            statementName = try preparedName(for: sql, handle: handle)
        } else {
            statementName = nil
        }
        let sent = Self.withParameters(parameters, typed: !usePrepared) { count, types, values, lengths, formats in
            if let statementName {
                PQsendQueryPrepared(handle, statementName, count, values, lengths, formats, binaryResults ? 1 : 0)
            } else {
                PQsendQueryParams(handle, sql, count, types, values, lengths, formats, binaryResults ? 1 : 0)
            }
        }
        let raw = try answer(sent: sent, handle: handle, sql: sql)
        return try check(raw, sql: sql, parameters: parameters, binary: binaryResults)
    }

    /// Runs a script of one or more statements (the simple query protocol, no parameters): migrations and
    /// transaction control.
    @discardableResult
    func executeScript(_ sql: String) throws(PostgresFailure) -> PostgresResult {
        guard let handle else { throw closedFailure(sql: sql) }
        return try check(try answer(sent: PQsendQuery(handle, sql), handle: handle, sql: sql), sql: sql, parameters: [])
    }

    /// Copies `data` (COPY text format, complete rows) into a table with `COPY … FROM STDIN`.
    ///
    /// - Parameter sql: the `COPY table (columns) FROM STDIN` statement.
    func copyIn(_ sql: String, data: [UInt8]) throws(PostgresFailure) {
        guard let handle else { throw closedFailure(sql: sql) }
        _ = try check(try answer(sent: PQsendQuery(handle, sql), handle: handle, sql: sql), sql: sql, parameters: [], expectCopy: true)
        let sent = data.withUnsafeBufferPointer { buffer in
            buffer.baseAddress.map { base in
                base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { PQputCopyData(handle, $0, Int32(buffer.count)) }
            } ?? 1
        }
        let ended = PQputCopyEnd(handle, sent == 1 ? nil : "FeedSync could not send the data")
        // The COPY's outcome is the next result; `answer` drains to the end so that the connection is ready again.
        let raw = try answer(sent: 1, handle: handle, sql: sql)
        _ = try check(raw, sql: sql, parameters: [])
        if sent != 1 || ended != 1 {
            throw connectionFailure(sql: sql)
        }
    }

    private func preparedName(for sql: String, handle: OpaquePointer) throws(PostgresFailure) -> String {
        if let name = recentlyPrepared.name(for: sql) { return name }
        if let name = prepared[sql] {
            recentlyPrepared.remember(sql, name: name)
            return name
        }
        let name = "feedsync_\(prepared.count + 1)"
        _ = try check(try answer(sent: PQsendPrepare(handle, name, sql, 0, nil), handle: handle, sql: sql), sql: sql, parameters: [])
        prepared[sql] = name
        recentlyPrepared.remember(sql, name: name)
        return name
    }

    /// Waits for the answer to what was just sent (`sent` is the `PQsend…` call's return value) and returns its
    /// result as `PQexec` would: the first error if any statement failed, else the last result; a `COPY` result at
    /// once. `nil` when the connection failed (``check(_:sql:parameters:expectCopy:binary:)`` reports it).
    ///
    /// Every wait for input is bounded by ``responseTimeout``, counted from the send: when it passes, the connection
    /// is closed and the call fails with ``PostgresFailure/noAnswer``.
    private func answer(sent: Int32, handle: OpaquePointer, sql: String) throws(PostgresFailure) -> OpaquePointer? {
        guard sent == 1 else { return nil }
        let deadline = responseTimeout.map { ContinuousClock.now + $0 }
        var kept: OpaquePointer?
        while true {
            guard try waitUntilReadable(handle, deadline: deadline, sql: sql) else { break }
            guard let result = PQgetResult(handle) else { break }
            let status = PQresultStatus(result)
            if status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH {
                if let kept { PQclear(kept) }
                return result
            }
            if let previous = kept {
                // An error stays; otherwise the later result replaces the earlier one.
                if PQresultStatus(previous) == PGRES_FATAL_ERROR {
                    PQclear(result)
                    continue
                }
                PQclear(previous)
            }
            kept = result
        }
        return kept
    }

    /// Reads input until libpq has a whole result (`PQisBusy` is false), waiting in `poll(2)` until `deadline`.
    ///
    /// - Returns: `false` when the connection failed while reading (libpq then reports the failure).
    /// - Throws: ``PostgresFailure`` with ``PostgresFailure/noAnswer`` when `deadline` passed; the connection is
    ///   closed.
    private func waitUntilReadable(
        _ handle: OpaquePointer, deadline: ContinuousClock.Instant?, sql: String
    ) throws(PostgresFailure) -> Bool {
        while PQisBusy(handle) == 1 {
            var milliseconds: Int32 = -1
            if let deadline {
                let remaining = ContinuousClock.now.duration(to: deadline)
                guard remaining > .zero else { throw giveUpWaiting(sql: sql) }
                milliseconds = Int32(
                    clamping: max(1, remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000))
            }
            var descriptor = pollfd(fd: PQsocket(handle), events: Int16(POLLIN), revents: 0)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0, errno == EINTR { continue }
            if ready == 0 { continue }  // the deadline is checked above
            // Readable, hung up or failed: libpq reads what there is and reports a failure as its result.
            if PQconsumeInput(handle) == 0 { return false }
        }
        return true
    }

    /// Closes the connection after the server did not answer in time, and the failure to throw.
    private func giveUpWaiting(sql: String) -> PostgresFailure {
        close()
        gaveUpWaiting = true
        return PostgresFailure(
            sqlState: nil,
            message: "no answer from the server within \(Self.describe(responseTimeout ?? .zero)); the connection was closed",
            sql: sql,
            connectionBroken: true, noAnswer: true)
    }

    /// A duration as people write it in a message: `20 s`, `1.5 s`, `250 ms`.
    static func describe(_ duration: Duration) -> String {
        let millis = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
        if millis < 1000 { return "\(millis) ms" }
        if millis % 1000 == 0 { return "\(millis / 1000) s" }
        return "\(Double(millis) / 1000) s"
    }

    /// Turns a libpq result into a ``PostgresResult`` or a ``PostgresFailure``.
    private func check(
        _ raw: OpaquePointer?, sql: String, parameters: [DatabaseValue], expectCopy: Bool = false, binary: Bool = false
    ) throws(PostgresFailure) -> PostgresResult {
        guard let raw else { throw connectionFailure(sql: sql) }
        let status = PQresultStatus(raw)
        switch status {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            answeredRoundTrips += 1
            return PostgresResult(raw, binary: binary)
        case PGRES_COPY_IN where expectCopy:
            answeredRoundTrips += 1
            return PostgresResult(raw)
        default:
            let field = { (code: UInt8) -> String? in
                PQresultErrorField(raw, Int32(code)).map { String(cString: $0) }
            }
            let sqlState = field(UInt8(ascii: "C"))
            var message = field(UInt8(ascii: "M")) ?? String(cString: PQresultErrorMessage(raw))
            if message.isEmpty, let handle { message = String(cString: PQerrorMessage(handle)) }
            let constraint = field(UInt8(ascii: "n"))
            let table = field(UInt8(ascii: "t"))
            PQclear(raw)
            if status == PGRES_COPY_IN || status == PGRES_COPY_OUT || status == PGRES_COPY_BOTH {
                // A COPY this code did not ask for: the connection is in a state it cannot leave cleanly.
                close()
            }
            let broken = isBroken || Self.isConnectionState(sqlState)
            if !broken { answeredRoundTrips += 1 }
            throw PostgresFailure(
                sqlState: sqlState,
                message: Self.scrub(
                    message.trimmingCharacters(in: .whitespacesAndNewlines), sqlState: sqlState, parameters: parameters,
                    secrets: secrets),
                constraint: constraint, table: table, sql: sql, connectionBroken: broken)
        }
    }

    /// Whether an SQLSTATE says the session is over: class 08 (connection exception) or the server shutting the
    /// session down (`57P01`–`57P03`).
    static func isConnectionState(_ sqlState: String?) -> Bool {
        guard let sqlState else { return true }
        return sqlState.hasPrefix("08") || sqlState == "57P01" || sqlState == "57P02" || sqlState == "57P03"
    }

    private func connectionFailure(sql: String?) -> PostgresFailure {
        let text = handle.map { String(cString: PQerrorMessage($0)) } ?? ""
        let message = text.isEmpty ? "the connection to the server was lost" : text
        return PostgresFailure(
            sqlState: nil, message: Self.scrub(message.trimmingCharacters(in: .whitespacesAndNewlines), secrets: secrets),
            constraint: nil, table: nil, sql: sql, connectionBroken: true)
    }

    private func closedFailure(sql: String?) -> PostgresFailure {
        PostgresFailure(
            sqlState: nil, message: "the connection is closed", constraint: nil, table: nil, sql: sql, connectionBroken: true)
    }

    // MARK: - Scrubbing

    /// Removes every secret (the password) from a message.
    static func scrub(_ message: String, secrets: [String]) -> String {
        var message = message
        for secret in secrets where !secret.isEmpty {
            message = message.replacingOccurrences(of: secret, with: "***")
        }
        return message
    }

    /// Removes secrets and bound values from a server message.
    ///
    /// The server quotes the values it echoes (`invalid input syntax for type bigint: "abc"`): every quoted
    /// occurrence of a bound value becomes `"…"`, and in a data exception (class 22) every quoted segment does.
    static func scrub(_ message: String, sqlState: String?, parameters: [DatabaseValue], secrets: [String]) -> String {
        var message = scrub(message, secrets: secrets)
        for parameter in parameters {
            let text: String? =
                switch parameter {
                case .null, .blob: nil
                case .integer(let value): String(value)
                case .real(let value): Self.text(value)
                case .text(let value): value
                }
            if let text, !text.isEmpty {
                message = message.replacingOccurrences(of: "\"\(text)\"", with: "\"…\"")
            }
        }
        if sqlState?.hasPrefix("22") == true {
            message = quotedSegmentsRemoved(message)
        }
        return message
    }

    /// `message` with the content of every `"…"` segment replaced by `…`.
    private static func quotedSegmentsRemoved(_ message: String) -> String {
        var result = ""
        var inside = false
        for character in message {
            if character == "\"" {
                if inside { result += "…\"" } else { result.append(character) }
                inside.toggle()
            } else if !inside {
                result.append(character)
            }
        }
        if inside { result += "…" }
        return result
    }

    // MARK: - Parameters

    /// A double in PostgreSQL's text input syntax.
    static func text(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Infinity" : "Infinity" }
        return "\(value)"
    }

    /// Calls `body` with libpq's parameter arrays for `parameters`: count, types, values, lengths and formats.
    ///
    /// Integers, doubles and text are sent in text format, blobs in binary. With `typed`, integers are declared
    /// `int8`, doubles `float8` and blobs `bytea` (for SQL of the caller's, where the server cannot always infer a
    /// type); text stays `unknown` so the server can read it as the column's type.
    static func withParameters<R>(
        _ parameters: [DatabaseValue], typed: Bool,
        _ body: (Int32, UnsafePointer<UInt32>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?, UnsafePointer<Int32>?) -> R
    ) -> R {
        if parameters.isEmpty { return body(0, nil, nil, nil, nil) }
        var storage: [UInt8] = []
        var offsets: [Int?] = []
        var types: [UInt32] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        for parameter in parameters {
            var bytes: [UInt8]?
            var type: UInt32 = 0
            var format: Int32 = 0
            switch parameter {
            case .null: bytes = nil
            case .integer(let value):
                bytes = Array(String(value).utf8)
                type = 20
            case .real(let value):
                bytes = Array(text(value).utf8)
                type = 701
            case .text(let value): bytes = Array(value.utf8)
            case .blob(let value):
                bytes = value
                type = 17
                format = 1
            }
            if let bytes {
                offsets.append(storage.count)
                storage += bytes
                storage.append(0)
                lengths.append(Int32(bytes.count))
            } else {
                offsets.append(nil)
                lengths.append(0)
            }
            types.append(typed ? type : 0)
            formats.append(format)
        }
        // One byte at least, so that the buffer has an address even when every parameter is NULL.
        storage.append(0)
        return storage.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { preconditionFailure("a non-empty array has storage") }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { characters in
                let values: [UnsafePointer<CChar>?] = offsets.map { offset in offset.map { characters + $0 } }
                return body(Int32(parameters.count), types, values, lengths, formats)
            }
        }
    }
}

/// The last few prepared statements, found by the address of their text's bytes.
///
/// Each entry keeps its `String`, so its storage stays allocated and unchanged for as long as the entry lives: a text
/// stored at the same address with the same length *is* that text, with no hashing and no comparison of bytes. The
/// statements FeedSync prepares are string constants (their bytes live in the binary) or strings built once, so a
/// repeated statement is found here; anything else falls through to the dictionary keyed by the whole text. Texts
/// of 15 bytes or fewer are stored inline in the `String` (no stable address) and always fall through.
private struct RecentStatements {
    private var entries: [(address: UnsafeRawPointer, count: Int, sql: String, name: String)] = []
    private var next = 0
    static let capacity = 16

    /// The name of `sql` if it is one of the recent statements' own storage.
    func name(for sql: String) -> String? {
        guard let (address, count) = Self.storage(of: sql) else { return nil }
        for entry in entries where entry.address == address && entry.count == count { return entry.name }
        return nil
    }

    /// Remembers `sql` (replacing the oldest entry when full), unless its bytes have no stable address.
    mutating func remember(_ sql: String, name: String) {
        guard let (address, count) = Self.storage(of: sql) else { return }
        let entry = (address: address, count: count, sql: sql, name: name)
        if entries.count < Self.capacity {
            entries.append(entry)
        } else {
            entries[next] = entry
            next = (next + 1) % Self.capacity
        }
    }

    /// Where `sql`'s UTF-8 bytes are stored, for a native string too long to be stored inline.
    private static func storage(of sql: String) -> (UnsafeRawPointer, Int)? {
        guard sql.utf8.count > 15 else { return nil }
        return sql.utf8.withContiguousStorageIfAvailable { bytes in
            bytes.baseAddress.map { (UnsafeRawPointer($0), bytes.count) }
        } ?? nil
    }
}

/// A notification received on a connection that ran `LISTEN` (libpq's `PGnotify`).
struct PostgresNotification: Sendable, Equatable {
    /// The channel it was sent on.
    let channel: String
    /// The payload (empty when none was given).
    let payload: String
    /// The server process id of the session that sent it.
    let senderPID: Int32
}

extension PostgresConnection {
    // MARK: - Asynchronous notifications

    /// The connection's socket, for `poll(2)`; `-1` when closed.
    var socket: Int32 {
        guard let handle else { return -1 }
        return PQsocket(handle)
    }

    /// Reads whatever the server has sent without blocking (`PQconsumeInput`), so that notifications become
    /// available to ``notifications()``.
    ///
    /// - Returns: `false` when the connection failed (it is then ``isBroken`` or soon will be).
    func consumeInput() -> Bool {
        guard let handle else { return false }
        return PQconsumeInput(handle) == 1
    }

    /// The notifications libpq has read so far (by ``consumeInput()`` or during any statement), oldest first;
    /// each is returned once.
    func notifications() -> [PostgresNotification] {
        guard let handle else { return [] }
        var received: [PostgresNotification] = []
        while let notify = PQnotifies(handle) {
            let fields = notify.pointee
            received.append(
                PostgresNotification(
                    channel: fields.relname.map { String(cString: $0) } ?? "",
                    payload: fields.extra.map { String(cString: $0) } ?? "", senderPID: fields.be_pid))
            PQfreemem(notify)
        }
        return received
    }
}

/// Calls `body` with NUL-terminated copies of `strings` followed by a `NULL` entry, as libpq's keyword arrays want.
private func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
    return pointers.withUnsafeBufferPointer { buffer in
        // A non-empty array always has storage.
        guard let base = buffer.baseAddress else { preconditionFailure("an array of one or more elements has storage") }
        return body(base)
    }
}
