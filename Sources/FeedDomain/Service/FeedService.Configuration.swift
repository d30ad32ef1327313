extension FeedService {
    /// How a service runs, beyond its database: the async API's thread pool, the log hook and what counts as slow.
    ///
    /// `FeedService(location:options:bridge:logger:)` builds one from ``FeedOpenOptions`` and the logger; pass one
    /// yourself to `FeedService.init(backend:bridge:configuration:)` (package-internal).
    ///
    /// ```swift
    /// var configuration = FeedService.Configuration()
    /// configuration.blockingThreads = 16                        // a server with many concurrent requests
    /// configuration.slowCommandThreshold = .milliseconds(250)
    /// configuration.logger = { event in print(event) }
    /// let service = try FeedService(backend: backend, configuration: configuration)
    /// ```
    public struct Configuration: Sendable {
        /// The size of the process-wide pool the async API uses by default.
        public static let defaultBlockingThreads = 8

        /// The most threads the async API's calls run on at once; further calls wait in a queue. At least 1.
        ///
        /// With ``defaultBlockingThreads`` (8) the service shares one process-wide pool with every other service
        /// using the default; any other value gives the service a pool of its own. Threads start on demand and exit
        /// after 10 seconds without work.
        public var blockingThreads = Configuration.defaultBlockingThreads
        /// A command that takes longer than this, from its call to its `COMMIT` (a like command's wait for its group
        /// included), is logged as ``FeedLogEvent/Kind/slowCommand``, and a query that takes longer as
        /// ``FeedLogEvent/Kind/slowQuery``; `nil` logs none. 1 second by default.
        public var slowCommandThreshold: Duration? = .seconds(1)
        /// Where the service's log events go; `nil` (the default) logs nothing.
        public var logger: FeedLogger?

        /// The defaults: the shared pool of 8 threads, slow commands from 1 second, no logger.
        public init() {}

        /// A configuration from its parts.
        public init(
            blockingThreads: Int = Configuration.defaultBlockingThreads, slowCommandThreshold: Duration? = .seconds(1),
            logger: FeedLogger? = nil
        ) {
            self.blockingThreads = blockingThreads
            self.slowCommandThreshold = slowCommandThreshold
            self.logger = logger
        }
    }
}
