import FeedServer
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A server in a process with more than 1,024 open files — a busy server, or a test run — gets socket numbers that
/// `select(2)` cannot watch; it must answer on them anyway.
@Suite(.ownThreads) struct ManyOpenFilesTests {
    @Test func aServerWhoseSocketsNumberAbove1024Answers() throws {
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        while held.count < 1_100 {
            let fd = open("/dev/null", O_RDONLY)
            try #require(fd >= 0, "cannot open more files: \(String(cString: strerror(errno)))")
            held.append(fd)
        }
        try #require((held.max() ?? 0) > 1_024)
        guard let sut = try ServerFixture(on: .sqlite) else { return }
        defer { sut.close() }
        for _ in 0..<3 {
            let health = try HTTPTestClient.request("GET", "/health", port: sut.port)
            #expect(health.status == 200)
        }
    }
}
