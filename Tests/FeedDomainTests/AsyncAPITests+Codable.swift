import FeedSync
import FeedCore
import FeedDependencies
@testable import FeedDomain
import FeedPublishers
import FeedSQLite
import FeedSQLiteBackend
import FeedTestSupport
import Foundation
import Testing

/// The async API's results as JSON.
extension AsyncAPITests {
    // MARK: - Codable results

    @Test(arguments: TestBackend.allCases) func feedPageAndPostDetailRoundTripThroughJSON(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        try await service.like(userID: "user2", postID: "post1")
        let page = try await service.feedPage(viewerID: "user2", limit: 2)
        let last = try await service.feedPage(viewerID: nil, before: page.nextCursor, limit: 10)
        #expect(page.nextCursor != nil && last.nextCursor == nil && last.viewerID == nil)
        for value in [page, last] {
            #expect(try JSONDecoder().decode(FeedPage.self, from: JSONEncoder().encode(value)) == value)
        }
        let detail = try await service.post(id: "post1", viewerID: "user2")
        #expect(detail.liked)
        #expect(try JSONDecoder().decode(PostDetail.self, from: JSONEncoder().encode(detail)) == detail)
    }

    @Test(arguments: TestBackend.allCases) func feedPageJSONKeysAreStable(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let page = try await service.feedPage(viewerID: "user2", limit: 2)
        let cursor = try #require(page.nextCursor)
        let object = try jsonObject(page)
        #expect(Set(object.keys) == ["viewerID", "rows", "nextCursor"])
        #expect(object["viewerID"] as? String == "user2")
        #expect(object["nextCursor"] as? String == cursor.description)
        let rows = try #require(object["rows"] as? [[String: Any]])
        #expect(rows.count == 2 && Set(rows[0].keys) == ["post", "liked"])
        // The last, anonymous page has the same keys, with nulls.
        let last = try jsonObject(try await service.feedPage(viewerID: nil, before: cursor, limit: 10))
        #expect(Set(last.keys) == ["viewerID", "rows", "nextCursor"])
        #expect(last["viewerID"] is NSNull && last["nextCursor"] is NSNull)
        #expect(Set(try jsonObject(try await service.post(id: "post1", viewerID: nil)).keys) == ["post", "liked"])
    }

    @Test func aMalformedCursorFailsToDecode() throws {
        let json = Data(#"{"viewerID":null,"rows":[],"nextCursor":"not-a-cursor"}"#.utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(FeedPage.self, from: json) }
        let missing = Data(#"{"rows":[]}"#.utf8)
        #expect(try JSONDecoder().decode(FeedPage.self, from: missing) == FeedPage(viewerID: nil, rows: [], nextCursor: nil))
    }

    @Test(arguments: TestBackend.allCases) func resultModelsRoundTripThroughJSON(on backend: TestBackend) async throws {
        let dir = TemporaryDirectory()
        guard let service = try makeService(in: dir, on: backend) else { return }
        let like = try await service.like(userID: "user3", postID: "post2")
        let unchanged = try await service.like(userID: "user3", postID: "post2")
        let page = try await service.feedPage(viewerID: "user3")
        let row = try #require(page.rows.first { $0.liked })
        try expectRoundTrip(row)
        try expectRoundTrip(row.post)
        try expectRoundTrip(try #require(try await service.users().first))
        try expectRoundTrip(try #require(try await service.events().last))
        try expectRoundTrip(try await service.status())
        try expectRoundTrip(like)
        try expectRoundTrip(unchanged)
    }
}

// MARK: - Helpers

private func jsonObject(_ value: some Encodable) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(value)) as? [String: Any])
}

private func expectRoundTrip<T: Codable & Equatable>(_ value: T, sourceLocation: SourceLocation = #_sourceLocation) throws {
    let decoded = try JSONDecoder().decode(T.self, from: JSONEncoder().encode(value))
    #expect(decoded == value, sourceLocation: sourceLocation)
}
