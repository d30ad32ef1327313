import FeedTestSupport
import Foundation
import Testing

/// The following commands (`events --follow`, `watch`, `app`) end with status 74 and one line on stderr when the
/// database file they follow is deleted or replaced, instead of staying silent forever on the old file.
@Suite struct DatabaseReplacedTests {
    let home = TemporaryDirectory("feedsync-replaced")
    var database: String { home.file("feed.sqlite") }

    var environment: [String: String] { CLIRun.environment(home: home.path, ["FEEDSYNC_DB": database]) }

    /// The followed database (the demo data), and another one next to it to move over it.
    func makeDatabases() throws -> String {
        let demo = try CLIRun.run(["demo"], environment: environment)
        try #require(demo.status == 0, "\(demo.stderr)")
        let replacement = home.file("replacement.sqlite")
        let created = try CLIRun.run(["init"], environment: CLIRun.environment(home: home.path, ["FEEDSYNC_DB": replacement]))
        try #require(created.status == 0, "\(created.stderr)")
        return replacement
    }

    var expectedError: String {
        "Error: the database file \"\(database)\" was deleted or replaced while it was followed; start again to follow "
            + "the new file.\n"
    }

    /// Likes a post from another process, so that a follower prints it once its change feed runs.
    func likeFromAnotherProcess() throws {
        let like = try CLIRun.run(["like", "post4", "--user", "carol"], environment: environment)
        try #require(like.status == 0, "\(like.stderr)")
    }

    @Test func eventsFollowExitsWith74WhenTheFileIsReplaced() throws {
        let replacement = try makeDatabases()
        let follower = try FollowingCLI(["events", "--follow"], environment: environment)
        #expect(follower.waitForStdout("SEQ"))
        // The backlog is printed before the feed starts: wait for a live event, then replace the file.
        try likeFromAnotherProcess()
        #expect(follower.waitForStdout("carol"))
        #expect(rename(replacement, database) == 0)
        let status = follower.waitForExit()
        #expect(status == 74)
        #expect(follower.stderr == expectedError)
    }

    @Test func eventsFollowExitsWith74WhenTheFileIsDeleted() throws {
        _ = try makeDatabases()
        let follower = try FollowingCLI(["events", "--follow", "--json", "--since", "8"], environment: environment)
        #expect(follower.waitForStdout(#"{"seq":9,"#))
        try likeFromAnotherProcess()
        #expect(follower.waitForStdout(#""userID":"carol""#))
        #expect(unlink(database) == 0)
        #expect(follower.waitForExit() == 74)
        #expect(follower.stderr == expectedError)
    }

    @Test func watchExitsWith74WhenTheFileIsReplaced() throws {
        let replacement = try makeDatabases()
        let watcher = try FollowingCLI(["watch", "--user", "bob"], environment: environment)
        #expect(watcher.waitForStdout("post1"))
        #expect(rename(replacement, database) == 0)
        #expect(watcher.waitForExit() == 74)
        #expect(watcher.stderr == expectedError)
    }

    @Test func appExitsWith74WhenTheFileIsReplaced() throws {
        let replacement = try makeDatabases()
        let app = try FollowingCLI(["app", "--user", "alice"], environment: environment)
        #expect(app.waitForStdout("Feed for alice"))
        #expect(rename(replacement, database) == 0)
        #expect(app.waitForExit() == 74)
        #expect(app.stderr == expectedError)
    }
}

/// A `feedsync` process left running, with stdout and stderr collected as they come and stdin kept open.
final class FollowingCLI: Sendable {
    private let process: Process
    private let input: Pipe
    private let output: Pipe
    private let errors: Pipe
    private let collected = Collected()
    private let errorText = Collected()
    private let condition = NSCondition()
    private let exited = DispatchSemaphore(value: 0)

    init(_ arguments: [String], environment: [String: String]) throws {
        process = Process()
        process.executableURL = URL(fileURLWithPath: CLIRun.executable)
        process.arguments = arguments
        process.environment = environment
        input = Pipe()
        output = Pipe()
        errors = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        for (pipe, buffer) in [(output, collected), (errors, errorText)] {
            pipe.fileHandleForReading.readabilityHandler = { [condition] handle in
                let data = handle.availableData
                condition.lock()
                buffer.text += String(decoding: data, as: UTF8.self)
                condition.broadcast()
                condition.unlock()
            }
        }
        process.terminationHandler = { [exited] _ in exited.signal() }
        try process.run()
    }

    deinit {
        if process.isRunning { process.terminate() }
    }

    /// Everything printed on stderr so far.
    var stderr: String {
        condition.lock()
        defer { condition.unlock() }
        return errorText.text
    }

    /// Waits until stdout contains `text`, at most `timeout` seconds; returns whether it appeared.
    func waitForStdout(_ text: String, timeout: TimeInterval = 10) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !collected.text.contains(text) {
            if !condition.wait(until: deadline) { return collected.text.contains(text) }
        }
        return true
    }

    /// Waits for the process to end, at most `timeout` seconds, and for the rest of its output; `nil` when it did
    /// not end (it is then killed).
    func waitForExit(timeout: TimeInterval = 10) -> Int32? {
        if exited.wait(timeout: .now() + timeout) == .timedOut {
            process.terminate()
            return nil
        }
        for pipe in [output, errors] {
            pipe.fileHandleForReading.readabilityHandler = nil
            let rest = pipe.fileHandleForReading.readDataToEndOfFile()
            condition.lock()
            (pipe === output ? collected : errorText).text += String(decoding: rest, as: UTF8.self)
            condition.unlock()
        }
        return process.terminationStatus
    }
}
