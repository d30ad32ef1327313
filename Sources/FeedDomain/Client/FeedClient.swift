public import FeedDependencies
public import FeedCore

/// FeedSync's commands and queries as a struct of closures, like an app's API client kept as a dependency: the dependency that
/// projections use, replaceable in tests and previews.
///
/// Its default values come from the `FeedSync` module, which knows the backends (the domain does not):
///
/// - `liveValue`: the database at ``FeedPaths/defaultDatabasePath(environment:)`` (a path or `$FEEDSYNC_DB`'s
///   URL), opened on first use.
/// - `testValue`: a fresh in-memory SQLite database with the migrations applied.
/// - `previewValue`: an in-memory database seeded with ``SampleData/demo``.
///
/// ```swift
/// let service = try FeedService(location: path)
/// withDependencies { $0.feedClient = .live(service) } operation: {
///     let feed = FeedListProjection(viewerID: "user1")
/// }
/// ```
public struct FeedClient: Sendable {
    /// Where this client's committed changes are published.
    public var bridge: EventBridge
    /// Creates a user: `(id, name)`.
    public var createUser: @Sendable (_ id: String, _ name: String) throws(FeedError) -> User
    /// Creates a post: `(id or nil to generate, authorID, body)`.
    public var createPost: @Sendable (_ id: String?, _ authorID: String, _ body: String) throws(FeedError) -> Post
    /// Likes a post: `(userID, postID)`.
    public var like: @Sendable (_ userID: String, _ postID: String) throws(FeedError) -> LikeResult
    /// Takes a like back: `(userID, postID)`.
    public var unlike: @Sendable (_ userID: String, _ postID: String) throws(FeedError) -> LikeResult
    /// Toggles a like: `(userID, postID)`.
    public var toggle: @Sendable (_ userID: String, _ postID: String) throws(FeedError) -> LikeResult
    /// One feed page: `(viewerID, cursor, limit)`.
    public var feedPage: @Sendable (_ viewerID: String?, _ cursor: FeedCursor?, _ limit: Int) throws(FeedError) -> FeedPage
    /// One post as a viewer sees it: `(postID, viewerID)`.
    public var post: @Sendable (_ id: String, _ viewerID: String?) throws(FeedError) -> PostDetail

    /// Creates a client from closures (for tests that stub single operations).
    public init(
        bridge: EventBridge,
        createUser: @escaping @Sendable (_ id: String, _ name: String) throws(FeedError) -> User,
        createPost: @escaping @Sendable (_ id: String?, _ authorID: String, _ body: String) throws(FeedError) -> Post,
        like: @escaping @Sendable (_ userID: String, _ postID: String) throws(FeedError) -> LikeResult,
        unlike: @escaping @Sendable (_ userID: String, _ postID: String) throws(FeedError) -> LikeResult,
        toggle: @escaping @Sendable (_ userID: String, _ postID: String) throws(FeedError) -> LikeResult,
        feedPage: @escaping @Sendable (_ viewerID: String?, _ cursor: FeedCursor?, _ limit: Int) throws(FeedError) -> FeedPage,
        post: @escaping @Sendable (_ id: String, _ viewerID: String?) throws(FeedError) -> PostDetail
    ) {
        self.bridge = bridge
        self.createUser = createUser
        self.createPost = createPost
        self.like = like
        self.unlike = unlike
        self.toggle = toggle
        self.feedPage = feedPage
        self.post = post
    }

    /// A client backed by `service`.
    public static func live(_ service: FeedService) -> FeedClient {
        FeedClient(
            bridge: service.bridge,
            createUser: { id, name throws(FeedError) in try service.createUser(id: id, name: name) },
            createPost: { id, author, body throws(FeedError) in try service.createPost(id: id, authorID: author, body: body) },
            like: { user, post throws(FeedError) in try service.like(userID: user, postID: post) },
            unlike: { user, post throws(FeedError) in try service.unlike(userID: user, postID: post) },
            toggle: { user, post throws(FeedError) in try service.toggle(userID: user, postID: post) },
            feedPage: { viewer, cursor, limit throws(FeedError) in try service.feedPage(viewerID: viewer, before: cursor, limit: limit) },
            post: { id, viewer throws(FeedError) in try service.post(id: id, viewerID: viewer) })
    }

    /// A client whose every operation fails with `error` (when the database cannot be opened).
    public static func failing(_ error: FeedError) -> FeedClient {
        FeedClient(
            bridge: EventBridge(),
            createUser: { _, _ throws(FeedError) in throw error },
            createPost: { _, _, _ throws(FeedError) in throw error },
            like: { _, _ throws(FeedError) in throw error },
            unlike: { _, _ throws(FeedError) in throw error },
            toggle: { _, _ throws(FeedError) in throw error },
            feedPage: { _, _, _ throws(FeedError) in throw error },
            post: { _, _ throws(FeedError) in throw error })
    }
}

/// Supplies ``FeedClient``'s default values. The `FeedSync` module conforms `FeedClient` to it, since only it can
/// open a backend; without that module linked, the defaults fail with a clear error.
public protocol FeedClientDefaults {
    /// A client over a fresh in-memory database (the test value).
    static var inMemoryClient: FeedClient { get }
    /// A client over an in-memory database seeded with sample data (the preview value).
    static var previewClient: FeedClient { get }
}

extension FeedClient: TestDependencyKey {
    /// A fresh in-memory database with the migrations applied.
    public static var testValue: FeedClient { defaults?.inMemoryClient ?? .failing(noBackend) }

    /// An in-memory database seeded with ``SampleData/demo``.
    public static var previewValue: FeedClient { defaults?.previewClient ?? .failing(noBackend) }

    private static var defaults: (any FeedClientDefaults.Type)? { FeedClient.self as? any FeedClientDefaults.Type }

    private static var noBackend: FeedError {
        .storage(.unsupportedLocation(":memory:", reason: "no FeedSync backend is linked: import FeedSync"))
    }
}

extension DependencyValues {
    /// The FeedSync client projections use (see ``FeedClient``).
    public var feedClient: FeedClient {
        get { self[FeedClient.self] }
        set { self[FeedClient.self] = newValue }
    }
}
