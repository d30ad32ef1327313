import FeedSQLite
import FeedSQLiteBackend
import FeedSync
import FeedTestSupport
import Testing

/// How ``FeedOpenOptions`` reaches the SQLite connections.
@Suite struct OpenOptionsTests {
    /// By default SQLite connections read through the configured memory map; `memoryMap = false` reads with `pread`.
    @Test func memoryMapOptionSetsTheConnectionsMap() throws {
        let dir = TemporaryDirectory()
        let path = dir.file("feed.sqlite")
        func mapSize(_ options: FeedOpenOptions) throws -> Int64? {
            let service = try FeedService(location: .sqliteFile(path: path), options: options)
            defer { service.close() }
            let store = try #require(service.backend as? FeedStore)
            return try store.unsafeRead { db in try db.fetchInt64("PRAGMA mmap_size") }
        }
        #expect(FeedOpenOptions().memoryMap)
        #expect(try mapSize(FeedOpenOptions()) == Int64(256 * 1_048_576))
        var noMap = FeedOpenOptions()
        noMap.memoryMap = false
        #expect(try mapSize(noMap) == 0)
        noMap.mode = .readCurrent
        noMap.removesWALFilesOnClose = true
        #expect(try mapSize(noMap) == 0)
    }
}
