#if PostgreSQL
    extension FeedBackends {
        /// Opens a PostgreSQL database (interim: the backend lands in the next commit).
        static func openPostgreSQL(_ url: String, options: FeedOpenOptions) throws -> any FeedBackend {
            throw StorageError.unsupportedLocation(FeedLocation.redacted(url), reason: "the PostgreSQL backend is not built yet")
        }
    }
#endif
