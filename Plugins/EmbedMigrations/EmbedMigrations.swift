import Foundation
import PackagePlugin

/// Embeds the numbered `.sql` files of `Migrations/sqlite/` into the `FeedMigrations` module at build time.
///
/// The SQL files stay the only source of the schema; the generated Swift file holds their exact text, so an
/// installed `feedsync` never looks for the folder at run time.
@main
struct EmbedMigrations: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let sqlDirectory = target.directoryURL.appending(path: "sqlite")
        let names = try FileManager.default.contentsOfDirectory(atPath: sqlDirectory.path())
            .filter { $0.hasSuffix(".sql") }
            .sorted()
        let inputs = names.map { sqlDirectory.appending(path: $0) }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedMigrations.swift")
        return [
            .buildCommand(
                displayName: "Embedding \(names.count) migration files",
                executable: try context.tool(named: "MigrationEmbedder").url,
                arguments: [output.path()] + inputs.map { $0.path() },
                inputFiles: inputs,
                outputFiles: [output]
            )
        ]
    }
}
