internal import FeedSync
internal import Foundation

extension CommandRunner {
    /// `init`: create or migrate; harmless twice.
    func initialize() throws(CLIError) -> ExitCode {
        let path = context.settings.databasePath
        let existed = FileManager.default.fileExists(atPath: path)
        let service = try context.openService(create: true)
        defer { service.store.close() }  // the last connection to close checkpoints the WAL
        let status = try attempt { () throws(FeedError) in try service.status() }
        if json {
            printJSON(
                .object([
                    ("path", .string(path)), ("schemaVersion", .number(status.schemaVersion)), ("created", .bool(!existed)),
                ]))
        } else {
            let verb = existed ? "Database is ready" : "Created database"
            console.line("\(verb): \(TextSanitizer.clean(path)) (schema version \(status.schemaVersion))")
        }
        return .success
    }

    /// `status`: path, schema, pending migrations, counts, last seq.
    func status() throws(CLIError) -> ExitCode {
        let service = try context.openService(create: false)
        defer { service.store.close() }  // the last connection to close checkpoints the WAL
        let status = try attempt { () throws(FeedError) in try service.status() }
        let path = context.settings.databasePath
        if json {
            printJSON(JSONShapes.status(status, path: path))
            return .success
        }
        var table = TextTable(headers: ["", ""], alignments: [.left, .left])
        table.rows = [
            ["database", TextSanitizer.clean(status.path ?? path)],
            ["schema version", "\(status.schemaVersion) (this feedsync: \(status.binarySchemaVersion))"],
            ["pending migrations", String(status.pendingMigrations)],
            ["users", String(status.users)],
            ["posts", String(status.posts)],
            ["likes", String(status.likes)],
            ["events", String(status.events)],
            ["last seq", String(status.lastSeq)],
        ]
        printLines(Array(table.lines().dropFirst()))
        return .success
    }

    /// `check`: 0 when every invariant holds, 1 listing each violation.
    func check() throws(CLIError) -> ExitCode {
        let service = try context.openService(create: true)
        defer { service.store.close() }  // the last connection to close checkpoints the WAL
        let violations = try attempt { () throws(FeedError) in try service.check() }
        if json {
            printJSON(
                .object([
                    ("ok", .bool(violations.isEmpty)),
                    ("violations", .array(violations.map { .object([("rule", .string($0.rule)), ("detail", .string($0.detail))]) })),
                ]))
        } else if violations.isEmpty {
            console.line("ok: integrity, like counts, log order and log replay all hold")
        } else {
            printLines(violations.map { TextSanitizer.clean($0.description) })
        }
        return violations.isEmpty ? .success : .violations
    }
}
