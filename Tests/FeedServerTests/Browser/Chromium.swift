import FeedTestSupport
import Foundation

/// A headless Chromium started for a test, driven over the Chrome DevTools Protocol.
///
/// The browser runs in a process group of its own with a fresh profile in a temporary directory; ``close()`` (also
/// run on release, so a failing test cleans up too) kills the whole group and removes the directory.
///
/// ```swift
/// let browser = try await Chromium.launch()
/// defer { browser.close() }
/// let page = try await browser.newPage()
/// try await page.navigate(to: "http://127.0.0.1:8080/")
/// ```
final class Chromium: Sendable {
    /// Where Debian installs the browser; `FEEDSYNC_CHROMIUM` names another one.
    static var executable: String? {
        let candidates = [ProcessInfo.processInfo.environment["FEEDSYNC_CHROMIUM"], "/usr/bin/chromium"]
        return candidates.compactMap { $0 }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    private let process: ProcessGroup
    private let directory: TemporaryDirectory
    private let connection: CDPConnection

    private init(process: ProcessGroup, directory: TemporaryDirectory, connection: CDPConnection) {
        self.process = process
        self.directory = directory
        self.connection = connection
    }

    deinit {
        close()
    }

    /// Starts the browser with its DevTools on two pipes, waiting at most `timeout` for its first answer.
    static func launch(timeout: Duration = .seconds(30)) async throws -> Chromium {
        guard let executable else { throw BrowserError("no chromium (set FEEDSYNC_CHROMIUM or install chromium)") }
        let directory = TemporaryDirectory("feedsync-chromium")
        let profile = directory.file("profile")
        try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
        let arguments = [
            "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe", "--user-data-dir=\(profile)",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--disable-sync",
            "--disable-component-update", "--disable-crash-reporter", "--disable-breakpad", "--mute-audio",
            // Two pages at once: neither may be throttled as a background tab while the other is in front.
            "--disable-background-timer-throttling", "--disable-renderer-backgrounding",
            "--disable-backgrounding-occluded-windows", "--window-size=900,1000", "--lang=en-US", "about:blank",
        ]
        var environment = ProcessInfo.processInfo.environment
        for key in ["HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"] { environment[key] = directory.path }
        let log = directory.file("chromium.log")
        let pipe = try DevToolsPipe()
        let process: ProcessGroup
        do {
            defer { pipe.closeChildEnds() }
            process = try ProcessGroup(
                executable: executable, arguments: arguments, environment: environment, log: log,
                descriptors: [3: pipe.childCommands, 4: pipe.childAnswers])
        } catch {
            pipe.close()
            throw error
        }
        let browser = Chromium(
            process: process, directory: directory,
            connection: CDPConnection(pipe: pipe, describeClose: { "(chromium: \(Self.tail(of: log)))" }))
        do {
            // The first answer shows that the browser is up and reads the pipe.
            _ = try await browser.connection.call("Browser.getVersion", timeout: timeout)
        } catch {
            browser.close()
            throw error
        }
        return browser
    }

    /// The last lines of chromium's output, for failure messages.
    static func tail(of log: String) -> String {
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(5).joined(separator: " | ")
    }

    /// Opens a new page (in a window of its own, so each renders as a foreground page) showing `about:blank`.
    func newPage() async throws -> BrowserPage {
        let target = try await connection.call("Target.createTarget", ["url": "about:blank", "newWindow": true])
        guard let targetID = target["targetId"] as? String else { throw BrowserError("no targetId in \(target)") }
        let attached = try await connection.call("Target.attachToTarget", ["targetId": targetID, "flatten": true])
        guard let sessionID = attached["sessionId"] as? String else { throw BrowserError("no sessionId in \(attached)") }
        let page = BrowserPage(connection: connection, sessionID: sessionID)
        try await page.enable()
        return page
    }

    /// The JavaScript exceptions and console errors of every page so far.
    var pageErrors: [String] { connection.pageErrors }

    /// Closes the connection, kills the browser's process group and removes its profile. Safe to call twice.
    func close() {
        connection.close()
        process.kill()
        try? FileManager.default.removeItem(atPath: directory.path)
    }
}
