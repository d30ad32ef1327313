import Foundation

/// One page (tab) of a ``Chromium``, reached through its flat DevTools session.
///
/// Waits poll the DOM with `Runtime.evaluate` until a condition holds or a deadline passes. They never sleep a
/// fixed time and never wait for load-idle or virtual time: the live page keeps an event stream open for good.
final class BrowserPage: Sendable {
    private let connection: CDPConnection
    private let sessionID: String

    init(connection: CDPConnection, sessionID: String) {
        self.connection = connection
        self.sessionID = sessionID
    }

    /// Sends `method` to this page.
    @discardableResult
    func call(_ method: String, _ params: [String: Any] = [:]) async throws -> [String: Any] {
        try await connection.call(method, params, sessionID: sessionID)
    }

    /// Turns on the domains the driver uses (`Runtime` also reports exceptions and console errors).
    func enable() async throws {
        try await call("Page.enable")
        try await call("Runtime.enable")
    }

    /// Loads `url` and waits until its document has loaded (`readyState` is `complete`).
    func navigate(to url: String, timeout: Duration = .seconds(15)) async throws {
        let answer = try await call("Page.navigate", ["url": url])
        if let error = answer["errorText"] as? String { throw BrowserError("cannot load \(url): \(error)") }
        try await waitUntil("document.readyState === 'complete' && location.href === \(Self.literal(url))", timeout: timeout)
    }

    /// Evaluates `expression` in the page (awaiting a promise) and returns its value as JSON-compatible Foundation
    /// values (`String`, `NSNumber`, `Bool`, arrays, dictionaries), or `nil` for `undefined` and `null`.
    ///
    /// - Throws: ``BrowserError`` with the exception's text when the expression throws.
    func evaluate(_ expression: String) async throws -> Any? {
        let answer = try await call(
            "Runtime.evaluate", ["expression": expression, "awaitPromise": true, "returnByValue": true])
        if let details = answer["exceptionDetails"] as? [String: Any] {
            let exception = details["exception"] as? [String: Any] ?? [:]
            throw BrowserError("\(expression): \(exception["description"] ?? details["text"] ?? "exception")")
        }
        let value = (answer["result"] as? [String: Any])?["value"]
        return value is NSNull ? nil : value
    }

    /// `expression`'s value as a string (`""` for `null` and `undefined`).
    func string(_ expression: String) async throws -> String {
        let value = try await evaluate(expression)
        return value.map { $0 as? String ?? "\($0)" } ?? ""
    }

    /// Polls `condition` (a JavaScript expression) until it is truthy; returns how long that took.
    ///
    /// - Throws: ``BrowserError`` naming the condition when it does not hold within `timeout`.
    @discardableResult
    func waitUntil(_ condition: String, timeout: Duration = .seconds(10)) async throws -> Duration {
        let clock = ContinuousClock()
        let start = clock.now
        while true {
            if try await evaluate("!!(\(condition))") as? Bool == true { return clock.now - start }
            if clock.now - start > timeout {
                let status = (try? await string(Self.text(testID: "status"))) ?? "?"
                throw BrowserError("not within \(timeout): \(condition) (page status: \"\(status)\")")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Clicks the element with `data-testid` `testID` with the mouse, at its centre, once it is visible (bounded)
    /// and scrolled into view.
    func click(testID: String) async throws {
        let element = Self.element(testID: testID)
        try await waitUntil("\(element)?.checkVisibility()")
        let centre = try await evaluate(
            """
            (() => { const e = \(element); if (!e?.checkVisibility()) throw new Error('no visible element \(testID)');
              e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();
              return [r.x + r.width / 2, r.y + r.height / 2]; })()
            """)
        guard let point = centre as? [Double], point.count == 2 else { throw BrowserError("no position for \(testID)") }
        for type in ["mousePressed", "mouseReleased"] {
            try await call(
                "Input.dispatchMouseEvent",
                ["type": type, "x": point[0], "y": point[1], "button": "left", "clickCount": 1])
        }
    }

    /// A PNG of the page's viewport.
    func screenshot() async throws -> Data {
        let answer = try await call("Page.captureScreenshot", ["format": "png"])
        guard let base64 = answer["data"] as? String, let data = Data(base64Encoded: base64) else {
            throw BrowserError("no screenshot data")
        }
        return data
    }

    // MARK: - JavaScript snippets

    /// `document.querySelector('[data-testid="…"]')`.
    static func element(testID: String) -> String {
        "document.querySelector(\(literal("[data-testid=\"\(testID)\"]")))"
    }

    /// The text of the element with `data-testid` `testID`, or `null`.
    static func text(testID: String) -> String {
        "\(element(testID: testID))?.textContent"
    }

    /// `value` as a JavaScript string literal.
    static func literal(_ value: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: [value])) ?? Data("[\"\"]".utf8)
        return String(decoding: data.dropFirst().dropLast(), as: UTF8.self)
    }
}
