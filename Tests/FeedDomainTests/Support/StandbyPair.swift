import FeedTestSupport
import Foundation
import Testing

/// A throwaway PostgreSQL primary with a streaming standby made from it (`.ci/postgres-server.sh start` and `standby`,
/// on loopback, removed when released), the URLs that reach them, and the `feedsync` command line to run against them.
final class StandbyPair {
    let primaryDir: String
    let standbyDir: String
    /// The primary's URL, and the standby's (the same with its port).
    let primary: String
    let standby: String
    let primaryPort: Int
    let standbyPort: String
    /// Both servers in one libpq multi-host URL, the primary first, for writes (`target_session_attrs=read-write`).
    let both: String
    let password: String
    let cli: String
    let home: TemporaryDirectory
    let environment: [String: String]

    /// Starts the primary, runs `prepare` on it (while it has no standby: `pg_basebackup` copies what it wrote), then
    /// makes the standby, `synchronous` or not. `nil` when no restartable test server is configured.
    init?(_ name: String, synchronous: Bool = false, prepare: (StandbyPair.Prepared) throws -> Void = { _ in }) throws {
        guard let parent = try PostgresFaultTests.restartableServerParent() else { return nil }
        cli = URL(fileURLWithPath: try benchExecutable()).deletingLastPathComponent().appendingPathComponent("feedsync").path
        let tag = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        primaryDir = parent + "/primary-" + tag
        standbyDir = parent + "/standby-" + tag
        home = TemporaryDirectory("feedsync-" + name)
        environment = ["PATH": "/usr/bin:/bin", "HOME": home.path, "LANG": "C.UTF-8"]
        primary = try PostgresFaultTests.script(["start", primaryDir], timeout: 60)
        let components = try #require(URLComponents(string: primary))
        primaryPort = try #require(components.port)
        password = try #require(components.password)
        do {
            try prepare(Prepared(cli: cli, environment: environment, primary: primary))
            standbyPort = try PostgresFaultTests.script(
                ["standby", standbyDir, primaryDir] + (synchronous ? ["sync"] : []), timeout: 120)
        } catch {
            _ = try? PostgresFaultTests.script(["stop", primaryDir], timeout: 60)
            throw error
        }
        standby = primary.replacingOccurrences(of: ":\(primaryPort)/", with: ":\(standbyPort)/")
        both =
            "postgresql://\(components.user ?? ""):\(password)@127.0.0.1:\(primaryPort),127.0.0.1:\(standbyPort)"
            + "\(components.path)?target_session_attrs=read-write&connect_timeout=2"
    }

    deinit {
        _ = try? PostgresFaultTests.script(["stop", standbyDir], timeout: 60)
        _ = try? PostgresFaultTests.script(["stop", primaryDir], timeout: 60)
    }

    /// What `prepare` gets: the primary alone.
    struct Prepared {
        let cli: String
        let environment: [String: String]
        let primary: String

        func feedsync(_ arguments: String...) throws -> (status: Int32, stdout: String, stderr: String) {
            try SpawnedProcess.run(cli, arguments, environment: environment)
        }
    }

    /// Runs `feedsync` with `arguments` and waits for it.
    func feedsync(_ arguments: String...) throws -> (status: Int32, stdout: String, stderr: String) {
        try SpawnedProcess.run(cli, arguments, environment: environment)
    }

    /// Runs `.ci/postgres-server.sh` with `arguments`.
    func script(_ arguments: String...) throws {
        try PostgresFaultTests.script(arguments, timeout: 90)
    }

    /// The seqs of JSON event lines (`"seq":N`).
    static func seqs(_ lines: [String]) -> [Int64] {
        lines.compactMap { line in
            line.range(of: #""seq":(\d+)"#, options: .regularExpression).flatMap { Int64(line[$0].dropFirst(6)) }
        }
    }
}
