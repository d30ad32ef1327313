internal import FeedSQLiteBackend

extension FeedClient: DependencyKey, FeedClientDefaults {
    /// The database at the default location (``FeedPaths/defaultDatabasePath(environment:)``: `$FEEDSYNC_DB` —
    /// a path or a `postgresql://` URL — or the per-user SQLite file), opened and migrated on first use.
    public static var liveValue: FeedClient {
        let location = FeedPaths.defaultDatabasePath(environment: FeedPaths.processEnvironment)
        do {
            if case .sqliteFile(let path) = try FeedLocation(location) {
                try FeedPaths.createParentDirectory(of: path)
            }
            return .live(try FeedService(location: location))
        } catch let error as FeedError {
            return .failing(error)
        } catch let error as StorageError {
            return .failing(.storage(error))
        } catch {
            return .failing(.storage(.cannotOpen(path: location, reason: "\(error)")))
        }
    }

    /// A client over a new in-memory SQLite database with the schema applied.
    public static var inMemoryClient: FeedClient {
        do {
            return .live(try FeedService(location: .sqliteInMemory))
        } catch {
            return .failing(error)
        }
    }

    /// An in-memory SQLite database seeded with ``SampleData/demo``.
    public static var previewClient: FeedClient {
        do {
            let service = try FeedService(location: .sqliteInMemory)
            try SampleData.demo.install(into: service)
            return .live(service)
        } catch {
            return .failing(error)
        }
    }

    /// A client over a new in-memory SQLite database with the schema applied.
    public static func inMemory() -> FeedClient { inMemoryClient }
}
