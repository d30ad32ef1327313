@testable import FeedDomain
import FeedCore
import FeedSync
import FeedTestSupport
import FeedTestThreads
import Foundation
import Testing

/// On SQLite an erased user's id leaves the files themselves: freed content is zeroed and the WAL truncated.
// Blocks: database calls on the test's thread.
@Suite(.ownThreads) struct DeletionFileTests {
    static let id = "erase-me-7f3a9c"

    @Test func anErasedUsersIdIsInNoneOfTheDatabasesFiles() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        let service = try withDependencies {
            $0.date = .constant(Date(timeIntervalSince1970: 1_700_000_000))
            $0.uuid = .incrementing
        } operation: {
            try FeedService(path: path)
        }
        defer { service.close() }
        try service.createUser(id: "author")
        try service.createUser(id: Self.id, name: "Someone")
        try service.createUser(id: "other")
        for i in 1...3_000 {
            try service.createPost(id: "p\(i)", authorID: "author", body: "post \(i)")
        }
        for i in 1...5 { try service.createPost(id: "own\(i)", authorID: Self.id, body: "own \(i)") }
        for start in stride(from: 1, through: 3_000, by: 500) {
            _ = try service.perform((start..<start + 500).map { LikeCommand(.like, userID: Self.id, postID: "p\($0)") })
        }
        _ = try service.perform((1...5).map { LikeCommand(.like, userID: "other", postID: "own\($0)") })
        _ = try service.perform((1...10).map { LikeCommand(.like, userID: "other", postID: "p\($0)") })
        _ = try service.issueToken(userID: Self.id, label: "laptop")
        #expect(Self.filesHoldingTheID(path) != [], "the id is in the files before the erasure")

        let erasure = try service.deleteUser(userID: Self.id)
        #expect(erasure.removedLikes == 3_000)
        #expect(erasure.deletedPosts == 5)
        #expect(try service.post(id: "p1", viewerID: "other").post.likeCount == 1)
        #expect(try service.check().isEmpty)
        #expect(Self.filesHoldingTheID(path) == [])
        // Work after the erasure does not bring it back.
        try service.like(userID: "other", postID: "p20")
        #expect(Self.filesHoldingTheID(path) == [])
    }

    /// The files among the database, its `-wal` and `-shm` whose bytes contain the id.
    static func filesHoldingTheID(_ path: String) -> [String] {
        let needle = Data(id.utf8)
        return [path, path + "-wal", path + "-shm"].filter { file in
            guard let bytes = FileManager.default.contents(atPath: file) else { return false }
            return bytes.range(of: needle) != nil
        }
    }
}
