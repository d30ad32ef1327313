import Foundation
import PackagePlugin

/// Embeds the numbered `.sql` files of `Migrations/sqlite/` and `Migrations/postgresql/` into the `FeedMigrations`
/// module at build time.
///
/// The SQL files stay the only source of each backend's schema; the generated Swift file holds their exact text
/// (`EmbeddedMigrationFile.all` for SQLite, `EmbeddedMigrationFile.postgresql` for PostgreSQL), so an installed
/// `feedsync` never looks for the folders at run time.
@main
struct EmbedMigrations: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let sqlite = try sqlFiles(in: target.directoryURL.appending(path: "sqlite"))
        let postgresql = try sqlFiles(in: target.directoryURL.appending(path: "postgresql"))
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedMigrations.swift")
        // Usage: MigrationEmbedder OUTPUT.swift SQLITE.sql... --postgresql POSTGRESQL.sql...
        let arguments = [output.path()] + sqlite.map { $0.path() } + ["--postgresql"] + postgresql.map { $0.path() }
        return [
            .buildCommand(
                displayName: "Embedding \(sqlite.count) SQLite and \(postgresql.count) PostgreSQL migration files",
                executable: try context.tool(named: "MigrationEmbedder").url,
                arguments: arguments,
                inputFiles: sqlite + postgresql,
                outputFiles: [output]
            )
        ]
    }

    /// The `.sql` files of `directory`, in file-name order; none when the directory does not exist.
    private func sqlFiles(in directory: URL) throws -> [URL] {
        guard FileManager.default.fileExists(atPath: directory.path()) else { return [] }
        return try FileManager.default.contentsOfDirectory(atPath: directory.path())
            .filter { $0.hasSuffix(".sql") }
            .sorted()
            .map { directory.appending(path: $0) }
    }
}
