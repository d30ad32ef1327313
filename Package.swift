// swift-tools-version: 6.1
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
        .library(name: "FeedSync", targets: ["FeedSync"]),
        .executable(name: "feedsync", targets: ["feedsync"]),
        .executable(name: "feedsync-bench", targets: ["feedsync-bench"]),
    ],
    targets: [
        // MARK: - C and build tooling
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
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
            name: "FeedSQLite",
            dependencies: ["CSQLite"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedMigrations",
            path: "Migrations",
            exclude: ["sql"],
            swiftSettings: strictSettings,
            plugins: ["EmbedMigrations"]
        ),
        .target(
            name: "FeedStorage",
            dependencies: ["FeedSQLite", "FeedMigrations", "FeedChecksum"],
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
            dependencies: ["FeedStorage", "FeedPublishers", "FeedDependencies"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedSync",
            dependencies: ["FeedSQLite", "FeedStorage", "FeedPublishers", "FeedDependencies", "FeedDomain"],
            swiftSettings: strictSettings
        ),
        .target(
            name: "FeedCLI",
            dependencies: ["FeedSync"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "feedsync",
            dependencies: ["FeedCLI"],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "feedsync-bench",
            dependencies: ["FeedSync"],
            swiftSettings: strictSettings
        ),

        // MARK: - Tests
        .target(
            name: "FeedTestSupport",
            dependencies: ["FeedSQLite", "FeedStorage"],
            path: "Tests/FeedTestSupport",
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedSQLiteTests",
            dependencies: ["FeedSQLite", "FeedTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedStorageTests",
            dependencies: ["FeedStorage", "FeedSQLite", "FeedMigrations", "FeedChecksum", "FeedTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedDomainTests",
            dependencies: ["FeedDomain", "FeedStorage", "FeedSQLite", "FeedPublishers", "FeedDependencies", "FeedTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedPublishersTests",
            dependencies: ["FeedPublishers"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedCLITests",
            dependencies: ["FeedCLI", "FeedSync", "FeedTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "FeedDependenciesTests",
            dependencies: ["FeedDependencies"],
            swiftSettings: strictSettings
        ),
    ]
)
