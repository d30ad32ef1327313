internal import FeedSQLite
internal import FeedSQLiteBackend
internal import Foundation

/// Opens the backend a location names: the one place that knows every backend this build has.
public enum FeedBackends {
    /// Whether this build has the PostgreSQL backend (the package's `PostgreSQL` trait, on by default).
    public static var hasPostgreSQL: Bool {
        #if PostgreSQL
            true
        #else
            false
        #endif
    }

    /// Whether this process can open a PostgreSQL location: the build has the backend, and the program can load libpq
    /// (a fully static executable cannot). Loads nothing.
    public static var opensPostgreSQL: Bool {
        #if PostgreSQL
            canLoadLibPQ
        #else
            false
        #endif
    }

    /// Opens the database at `location` — a SQLite file path, `:memory:`, or a `postgresql://` URL.
    ///
    /// - Throws: ``FeedError`` — `storage(.unsupportedLocation)` for another scheme (or PostgreSQL in a build
    ///   without it), and the backend's open errors (`cannotOpen`, `schemaNewer`, `connectionLost`, …).
    package static func open(_ location: String, options: FeedOpenOptions = FeedOpenOptions()) throws(FeedError) -> any FeedBackend {
        let parsed: FeedLocation
        do {
            parsed = try FeedLocation(location)
        } catch {
            throw FeedError.storage(error)
        }
        return try open(parsed, options: options)
    }

    /// Opens the database at a parsed location.
    package static func open(_ location: FeedLocation, options: FeedOpenOptions = FeedOpenOptions()) throws(FeedError) -> any FeedBackend {
        do {
            switch location {
            case .sqliteInMemory:
                return try FeedStore.inMemory()
            case .sqliteFile(let path):
                var configuration = Configuration()
                configuration.busyMode = .timeout(options.busyTimeout)
                configuration.removesWALFilesOnClose = options.removesWALFilesOnClose
                configuration.immutableWhenUnwritable = options.immutableWhenUnwritable
                if !options.backgroundCheckpoints { configuration.checkpointPolicy = .inline(pages: 1_000) }
                if !options.memoryMap { configuration.memoryMapSizeMiB = nil }
                let mode: FeedStore.OpenMode =
                    switch options.mode {
                    case .migrate: .migrate
                    case .readCurrent: .readCurrent
                    case .inspect: .inspect
                    }
                return try FeedStore(path: path, mode: mode, configuration: configuration)
            case .postgreSQL(let url):
                #if PostgreSQL
                    return try openPostgreSQL(url, options: options)
                #else
                    throw StorageError.unsupportedLocation(
                        location.description,
                        reason: "this FeedSync was built without PostgreSQL; enable the package's PostgreSQL trait")
                #endif
            }
        } catch {
            throw FeedError.wrap(error)
        }
    }
}

extension FeedService {
    /// Opens the database at `location` and creates a service over it: a file path is SQLite (created and migrated
    /// when missing), `:memory:` a private in-memory SQLite database, and a `postgresql://` or `postgres://` URL is
    /// PostgreSQL (libpq's URI: TLS and `.pgpass` as libpq provides them). Any other `scheme://` is refused.
    ///
    /// ```swift
    /// let local = try FeedService(location: "/var/lib/app/feed.sqlite")
    /// let shared = try FeedService(location: "postgresql://app@db.internal/feed?sslmode=require") { event in
    ///     print(event)   // or bridge it to swift-log; events never contain the password
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - location: a path, `:memory:` or a PostgreSQL URL.
    ///   - options: how to open it, the async API's pool size and the slow-command threshold.
    ///   - bridge: where events go out; a new one by default.
    ///   - logger: where the service's log events go (``FeedLogEvent``); `nil`, the default, logs nothing.
    /// - Throws: ``FeedError``; the description never contains a password.
    public convenience init(
        location: String, options: FeedOpenOptions = FeedOpenOptions(), bridge: EventBridge = EventBridge(),
        logger: FeedLogger? = nil
    ) throws(FeedError) {
        let parsed: FeedLocation
        do {
            parsed = try FeedLocation(location)
        } catch {
            throw FeedError.storage(error)
        }
        try self.init(location: parsed, options: options, bridge: bridge, logger: logger)
    }

    /// Opens (creating and migrating if needed) the SQLite database file at `path` and creates a service over it.
    ///
    /// Unlike ``init(location:options:bridge:logger:)-(String,_,_,_)`` a URL is not recognised here: `path` is always a
    /// file.
    public convenience init(path: String, bridge: EventBridge = EventBridge()) throws(FeedError) {
        try self.init(location: FeedLocation.sqliteFile(path: path), bridge: bridge)
    }

    /// Opens the database at a parsed location and creates a service over it.
    public convenience init(
        location: FeedLocation, options: FeedOpenOptions = FeedOpenOptions(), bridge: EventBridge = EventBridge(),
        logger: FeedLogger? = nil
    ) throws(FeedError) {
        let backend = try FeedBackends.open(location, options: options)
        let configuration = FeedService.Configuration(
            blockingThreads: options.blockingThreads, slowCommandThreshold: options.slowCommandThreshold, logger: logger)
        do {
            try self.init(backend: backend, bridge: bridge, configuration: configuration)
        } catch {
            backend.close()
            throw error
        }
    }
}
