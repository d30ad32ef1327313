import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// A server in a process with more than 1,024 open files — a busy server — gets socket numbers that `select(2)`
/// cannot watch; it must answer on them anyway.
// Blocks: waits for a `feedsync serve` child process and its answers.
@Suite(.ownThreads) struct ManyOpenFilesTests {
    @Test func aServerWhoseSocketsNumberAbove1024Answers() throws {
        let dir = TemporaryDirectory("feedsync-many-files")
        let database = dir.file("feed.sqlite")
        try FeedService(location: database).close()
        let server = try ServeProcess(database: database, home: dir.path, openFilesFirst: 1_100)
        defer { server.stop() }

        let sockets = try socketDescriptors(of: server.pid)
        #expect((sockets.max() ?? 0) > 1_024, "the server's sockets: \(sockets)")
        for _ in 0..<3 {
            let health = try HTTPTestClient.request("GET", "/health", port: server.port)
            #expect(health.status == 200)
        }
        #expect(server.stop() == 0, "\(server.log)")
    }

    /// The descriptor numbers of `pid`'s open sockets, from `/proc/PID/fd`.
    private func socketDescriptors(of pid: Int32) throws -> [Int] {
        let directory = "/proc/\(pid)/fd"
        return try FileManager.default.contentsOfDirectory(atPath: directory).compactMap { name in
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(name)"),
                target.hasPrefix("socket:")
            else { return nil }
            return Int(name)
        }.sorted()
    }
}
