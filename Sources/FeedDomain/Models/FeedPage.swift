public import FeedCore

/// One page of a viewer's feed: posts newest first, with like counts and which the viewer likes.
///
/// `Codable` with stable keys, ready for a JSON response: `viewerID` (string or `null`), `rows` (each
/// `{"post": {…}, "liked": …}`) and `nextCursor` — the cursor's opaque string form (``FeedCursor/description``, the
/// value ``FeedCursor/init(_:)`` parses back) or `null` on the last page. Every key is always present.
///
/// ```swift
/// let page = try await service.feedPage(viewerID: "user1", limit: 20)
/// let json = try JSONEncoder().encode(page)   // {"viewerID":"user1","rows":[…],"nextCursor":"1700000000000.3"}
/// ```
public struct FeedPage: Sendable, Hashable, Codable {
    /// The viewer, or `nil` for an anonymous feed (nothing is liked).
    public let viewerID: String?
    /// The posts with the viewer's like state, newest first.
    public let rows: [FeedRow]
    /// The cursor for the next (older) page, or `nil` when this page is the last.
    public let nextCursor: FeedCursor?

    /// The JSON keys; spelled out so that renaming a property cannot change them.
    private enum CodingKeys: String, CodingKey {
        case viewerID = "viewerID"
        case rows = "rows"
        case nextCursor = "nextCursor"
    }

    /// Creates a page.
    public init(viewerID: String?, rows: [FeedRow], nextCursor: FeedCursor?) {
        self.viewerID = viewerID
        self.rows = rows
        self.nextCursor = nextCursor
    }

    /// Decodes a page; a missing `viewerID` or `nextCursor` counts as `null`.
    ///
    /// - Throws: `DecodingError.dataCorrupted` when `nextCursor` is not a cursor string.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        viewerID = try container.decodeIfPresent(String.self, forKey: .viewerID)
        rows = try container.decode([FeedRow].self, forKey: .rows)
        if let text = try container.decodeIfPresent(String.self, forKey: .nextCursor) {
            guard let cursor = FeedCursor(text) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .nextCursor, in: container, debugDescription: "not a feed cursor: \(FeedError.quoted(text))")
            }
            nextCursor = cursor
        } else {
            nextCursor = nil
        }
    }

    /// Encodes the page with every key present (`null` for a missing viewer or cursor).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(viewerID, forKey: .viewerID)
        try container.encode(rows, forKey: .rows)
        try container.encode(nextCursor?.description, forKey: .nextCursor)
    }

    /// The ids of the posts on this page that the viewer likes (what the feed shows with ❤️).
    public var likedPostIDs: Set<String> {
        Set(rows.lazy.filter(\.liked).map(\.post.id))
    }
}

/// A post seen by a viewer: the detail view's data.
///
/// `Codable` with stable keys: `{"post": {…}, "liked": …}`.
public struct PostDetail: Sendable, Hashable, Codable {
    /// The post with its like count.
    public let post: Post
    /// Whether the viewer likes it.
    public let liked: Bool

    /// The JSON keys; spelled out so that renaming a property cannot change them.
    private enum CodingKeys: String, CodingKey {
        case post = "post"
        case liked = "liked"
    }

    /// Creates a detail.
    public init(post: Post, liked: Bool) {
        self.post = post
        self.liked = liked
    }
}
