import Foundation
import Synchronization

/// A failure reported by the browser or by the driver (a deadline, a closed connection).
struct BrowserError: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// One connection to Chromium's DevTools over its `--remote-debugging-pipe` (``DevToolsPipe``), speaking the Chrome
/// DevTools Protocol (<https://chromedevtools.github.io/devtools-protocol/>).
///
/// Commands carry an `id`; the answer with that id resumes the caller. Pages are reached through flat sessions
/// (`Target.attachToTarget` with `flatten: true`): a command for a page carries its `sessionId` on this same pipe.
/// Every command has a deadline, so a browser that stops answering fails the test instead of hanging it.
final class CDPConnection: Sendable {
    private let pipe: DevToolsPipe
    private let pending: PendingCommands

    /// Starts reading `pipe`'s messages; `describeClose` adds to the error of commands that the pipe's end fails.
    init(pipe: DevToolsPipe, describeClose: @escaping @Sendable () -> String = { "" }) {
        let pending = PendingCommands()
        self.pending = pending
        self.pipe = pipe
        pipe.start(
            onMessage: { pending.handle($0) },
            onClose: { pending.failAll(BrowserError("the DevTools connection closed: \($0) \(describeClose())")) })
    }

    /// Closes the pipe; commands still waiting fail.
    func close() {
        pipe.close()
        pending.failAll(BrowserError("the DevTools connection was closed"))
    }

    /// Sends `method` with `params` (to the page of `sessionID`, or to the browser) and returns the answer's
    /// `result` object.
    ///
    /// - Throws: ``BrowserError`` when the browser answers with an error, the connection closes, or no answer comes
    ///   within `timeout`.
    func call(
        _ method: String, _ params: [String: Any] = [:], sessionID: String? = nil, timeout: Duration = .seconds(30)
    ) async throws -> [String: Any] {
        let id = pending.nextID()
        var message: [String: Any] = ["id": id, "method": method, "params": params]
        if let sessionID { message["sessionId"] = sessionID }
        let text = String(decoding: try JSONSerialization.data(withJSONObject: message), as: UTF8.self)
        let timer = Task { [pending] in
            try await Task.sleep(for: timeout)
            pending.fail(id, BrowserError("\(method): no answer within \(timeout)"))
        }
        defer { timer.cancel() }
        let data = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Data, any Error>) in
            guard pending.register(id, continuation) else { return }
            do {
                try pipe.send(text)
            } catch {
                pending.fail(id, BrowserError("\(method): cannot send: \(error)"))
            }
        }
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }

    /// The JavaScript exceptions and console errors pages reported so far (for failure messages).
    var pageErrors: [String] { pending.pageErrors }
}

/// The commands waiting for their answer, and what the pages reported.
private final class PendingCommands: Sendable {
    private struct State {
        var lastID = 0
        var waiting: [Int: CheckedContinuation<Data, any Error>] = [:]
        var closed: BrowserError?
        var pageErrors: [String] = []
    }

    private let state = Mutex(State())

    func nextID() -> Int {
        state.withLock {
            $0.lastID += 1
            return $0.lastID
        }
    }

    /// Keeps `continuation` for the answer to `id`; resumes it at once (and returns `false`) when the connection is
    /// closed already.
    func register(_ id: Int, _ continuation: CheckedContinuation<Data, any Error>) -> Bool {
        let closed = state.withLock { state -> BrowserError? in
            if let closed = state.closed { return closed }
            state.waiting[id] = continuation
            return nil
        }
        if let closed { continuation.resume(throwing: closed) }
        return closed == nil
    }

    func fail(_ id: Int, _ error: BrowserError) {
        state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(throwing: error)
    }

    func failAll(_ error: BrowserError) {
        let waiting = state.withLock { state in
            state.closed = state.closed ?? error
            defer { state.waiting = [:] }
            return state.waiting.values
        }
        for continuation in waiting { continuation.resume(throwing: error) }
    }

    var pageErrors: [String] { state.withLock { $0.pageErrors } }

    /// Routes one message: an answer resumes its command; a page's exception or console error is kept.
    func handle(_ data: Data) {
        guard let message = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else { return }
        if let id = message["id"] as? Int {
            let outcome: Result<Data, BrowserError>
            if let error = message["error"] as? [String: Any] {
                outcome = .failure(BrowserError("DevTools error: \(error["message"] ?? error)"))
            } else {
                let result = message["result"] as? [String: Any] ?? [:]
                outcome = Result { try JSONSerialization.data(withJSONObject: result) }
                    .mapError { BrowserError("unreadable answer: \($0)") }
            }
            state.withLock { $0.waiting.removeValue(forKey: id) }?.resume(with: outcome.mapError { $0 })
        } else if let note = Self.pageError(message) {
            state.withLock { $0.pageErrors.append(note) }
        }
    }

    /// A one-line description of `Runtime.exceptionThrown` or an error-level `Runtime.consoleAPICalled`.
    private static func pageError(_ message: [String: Any]) -> String? {
        let params = message["params"] as? [String: Any] ?? [:]
        switch message["method"] as? String {
        case "Runtime.exceptionThrown":
            let details = params["exceptionDetails"] as? [String: Any] ?? [:]
            let exception = details["exception"] as? [String: Any] ?? [:]
            return "exception: \(exception["description"] ?? details["text"] ?? "?")"
        case "Runtime.consoleAPICalled" where params["type"] as? String == "error":
            let arguments = params["args"] as? [[String: Any]] ?? []
            return "console.error: " + arguments.map { "\($0["value"] ?? $0["description"] ?? "")" }.joined(separator: " ")
        default:
            return nil
        }
    }
}
