public import FeedDependencies
public import FeedStorage

/// FeedSync's commands and queries as a struct of closures, like seed 001's `APIManager`: the dependency that
/// projections use, replaceable in tests and previews.
///
/// - `liveValue`: the SQLite file at ``FeedPaths/defaultDatabasePath(environment:)`` (opened on first use).
/// - `testValue`: a fresh in-memory database with the migrations applied.
/// - `previewValue`: an in-memory database seeded with ``SampleData/demo``.
///
/// ```swift
/// let service = try FeedService(path: path)
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

    /// A client over a new in-memory database with the schema applied.
    public static func inMemory() -> FeedClient {
        do {
            return .live(try FeedService(store: try FeedStore.inMemory()))
        } catch {
            return .failing(FeedError.wrap(error))
        }
    }
}

extension FeedClient: DependencyKey {
    /// The SQLite file at the default path, opened (and migrated) on first use.
    public static var liveValue: FeedClient {
        let path = FeedPaths.defaultDatabasePath(environment: FeedPaths.processEnvironment)
        do {
            try FeedPaths.createParentDirectory(of: path)
            return .live(try FeedService(path: path))
        } catch let error as FeedError {
            return .failing(error)
        } catch {
            return .failing(.storage(.cannotOpen(path: path, reason: "\(error)")))
        }
    }

    /// A fresh in-memory database with the migrations applied.
    public static var testValue: FeedClient { .inMemory() }

    /// An in-memory database seeded with ``SampleData/demo``.
    public static var previewValue: FeedClient {
        do {
            let service = try FeedService(store: try FeedStore.inMemory())
            try SampleData.demo.install(into: service)
            return .live(service)
        } catch {
            return .failing(FeedError.wrap(error))
        }
    }
}

extension DependencyValues {
    /// The FeedSync client projections use (see ``FeedClient``).
    public var feedClient: FeedClient {
        get { self[FeedClient.self] }
        set { self[FeedClient.self] = newValue }
    }
}
