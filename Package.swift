// swift-tools-version: 6.3
import PackageDescription

/// Settings shared by every Swift target: Swift 6 language mode plus the upcoming features
/// recommended in the style guide.
let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

let package = Package(
    name: "FeedSync",
    products: [
        // The one library: the backends are reached through `FeedService(location:options:)`, never directly.
        .library(name: "FeedSync", targets: ["FeedSync"]),
        .executable(name: "feedsync", targets: ["feedsync"]),
        .executable(name: "feedsync-bench", targets: ["feedsync-bench"]),
    ],
    // The PostgreSQL backend needs libpq (apt `libpq-dev`). It is on by default; a package that wants SQLite only
    // depends on FeedSync with `traits: []` and builds without libpq.
    traits: [
        .trait(name: "PostgreSQL", description: "The PostgreSQL backend (links the system's libpq)."),
        .trait(name: "HTTP", description: "`feedsync serve`, the HTTP server (links the system's libmicrohttpd)."),
        .default(enabledTraits: ["PostgreSQL", "HTTP"]),
    ],
    targets: [
        // MARK: - C and build tooling
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // libpq's declarations only (its header from libpq-dev, found where Debian/Ubuntu or Fedora put it). No
        // pkg-config: that would also link libpq, which CLibPQLoader loads on first use instead (Docs/Storage.md,
        // "Loading libpq").
        .systemLibrary(name: "CLibPQ"),
        // Linux's epoll (sys/epoll.h), which Glibc's Swift module leaves out: feedsync-bench's w10 client.
        .systemLibrary(name: "CEpoll"),
        // Linux's perf_event_open(2) behind a non-variadic wrapper: feedsync-bench's instructions per operation.
        .systemLibrary(name: "CPerfEvent"),
        .systemLibrary(
            name: "CMicroHTTPD",
            pkgConfig: "libmicrohttpd",
            providers: [.apt(["libmicrohttpd-dev"])]
        ),
        .target(
            name: "CLibPQLoader",
            dependencies: ["CLibPQ"],
            linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]
        ),
        .target(
            name: "FeedChecksum",
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "MigrationEmbedder",
            dependencies: ["FeedChecksum"],
            swiftSettings: strictSettings
        ),
        .plugin(
            name: "EmbedMigrations",
            capability: .buildTool(),
            dependencies: ["MigrationEmbedder"]
        ),

        // MARK: - Library layers
        .target(
            name: "FeedCore",
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedSQLite",
            dependencies: ["CSQLite"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedMigrations",
            dependencies: ["FeedChecksum"],
            path: "Migrations",
            exclude: ["sqlite", "postgresql"],
            swiftSettings: strictSettings,
            plugins: ["EmbedMigrations"]
        ),
        .target(
            name: "FeedSQLiteBackend",
            dependencies: ["FeedCore", "FeedSQLite", "FeedMigrations", "FeedChecksum"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedPublishers",
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedDependencies",
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedDomain",
            dependencies: ["FeedCore", "FeedPublishers", "FeedDependencies", "FeedChecksum"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedPostgresBackend",
            dependencies: ["CLibPQ", "CLibPQLoader", "FeedCore", "FeedMigrations", "FeedChecksum"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedSync",
            dependencies: [
                "FeedCore", "FeedSQLiteBackend", "FeedPublishers", "FeedDependencies", "FeedDomain",
                .target(name: "FeedPostgresBackend", condition: .when(traits: ["PostgreSQL"])),
            ],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedJSON",
            dependencies: ["FeedCore", "FeedDomain"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedServer",
            dependencies: ["CMicroHTTPD", "CEpoll", "FeedDomain", "FeedSync", "FeedJSON"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedCLI",
            dependencies: ["FeedSync", "FeedJSON", .target(name: "FeedServer", condition: .when(traits: ["HTTP"]))],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "feedsync",
            dependencies: ["FeedCLI"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "feedsync-bench",
            dependencies: [
                "FeedSync", "FeedSQLite", "CEpoll", "CPerfEvent",
                .target(name: "FeedPostgresBackend", condition: .when(traits: ["PostgreSQL"])),
            ],
            swiftSettings: strictSettings
        ),

        // MARK: - Tests
        .target(
            name: "FeedTestThreads",
            path: "Tests/FeedTestThreads",
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedTestSupport",
            dependencies: ["FeedCore", "FeedSQLite", "FeedSQLiteBackend", "FeedPostgresBackend", "FeedTestThreads"],
            path: "Tests/FeedTestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedSQLiteTests",
            dependencies: ["FeedSQLite", "FeedTestSupport", "FeedTestThreads"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedSQLiteBackendTests",
            dependencies: [
                "FeedCore", "FeedSQLiteBackend", "FeedSQLite", "FeedMigrations", "FeedChecksum", "FeedTestSupport",
                "FeedTestThreads",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedDomainTests",
            dependencies: [
                "FeedSync", "FeedCore", "FeedDomain", "FeedSQLiteBackend", "FeedSQLite", "FeedMigrations", "FeedPublishers",
                "FeedDependencies", "FeedPostgresBackend",
                "FeedTestSupport", "FeedTestThreads",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedPostgresBackendTests",
            dependencies: ["FeedPostgresBackend", "FeedCore", "FeedMigrations", "FeedTestSupport", "FeedTestThreads"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedPublishersTests",
            dependencies: ["FeedPublishers", "FeedTestThreads"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedCLITests",
            dependencies: [
                "FeedCLI", "FeedSync", "FeedJSON", "FeedSQLiteBackend", "FeedSQLite", "FeedMigrations", "FeedTestSupport",
                "FeedTestThreads",
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedServerTests",
            dependencies: ["FeedServer", "FeedSync", "FeedJSON", "FeedTestSupport", "FeedTestThreads"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedDependenciesTests",
            dependencies: ["FeedDependencies", "FeedTestThreads"],
            swiftSettings: strictSettings
        ),
    ]
)
