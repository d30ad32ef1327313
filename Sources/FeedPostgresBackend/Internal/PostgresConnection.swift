internal import CLibPQ
internal import FeedCore
internal import Foundation
internal import Synchronization

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
            if case .text(let text) = parameter, Self.containsNUL(text) {
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
    /// once. `nil` when the connection failed (``check(_:sql:parameters:expectCopy:binary:)`` reports it) — also
    /// after a result arrived: a statement outside a transaction block commits after its rows and its completion
    /// (the extended protocol commits at `Sync`), and a commit can still fail, so until the server says it is ready
    /// for the next query, rows are no proof of a commit. A connection lost in between leaves the outcome unknown,
    /// and the caller treats it as any lost connection (a like batch is sent again on its lane and answers with what
    /// committed).
    ///
    /// Every wait for input is bounded by ``responseTimeout``, counted from the send: when it passes, the connection
    /// is closed and the call fails with ``PostgresFailure/noAnswer``.
    private func answer(sent: Int32, handle: OpaquePointer, sql: String) throws(PostgresFailure) -> OpaquePointer? {
        guard sent == 1 else { return nil }
        PostgresRoundTrips.sent.add(1, ordering: .relaxed)
        let deadline = responseTimeout.map { ContinuousClock.now + $0 }
        var kept: OpaquePointer?
        while true {
            guard try waitUntilReadable(handle, deadline: deadline, sql: sql) else {
                if let kept { PQclear(kept) }
                return nil
            }
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
