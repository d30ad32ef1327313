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

    /// `status`: path, schema version, pending migrations, counts, last seq — read without migrating or writing
    /// anything, so the pending migrations are the database's real ones. The counts need the current schema: on a
    /// database that needs migrating they are not shown (`null` in JSON) and a hint on stderr points to `init`.
    func status() throws(CLIError) -> ExitCode {
        let store = try context.openStore(mode: .inspect)
        defer { store.close() }  // the last connection to close removes the -wal and -shm files reading created
        let path = context.settings.databasePath
        let status: StatusReport
        do {
            status = try store.read { db in try StatusReport(db, migrator: store.migrator, path: path) }
        } catch let error as StorageError {
            throw CLIError(FeedError.storage(error))
        } catch {
            throw CLIError(FeedError.storage(.sqlite(SQLiteError(code: .error, message: "\(error)"))))
        }
        if json {
            printJSON(JSONShapes.status(status))
        } else {
            let count: (Int?) -> String = { $0.map(String.init) ?? "-" }
            var table = TextTable(headers: ["", ""], alignments: [.left, .left])
            table.rows = [
                ["database", TextSanitizer.clean(status.path)],
                ["schema version", "\(status.schemaVersion) (this feedsync: \(status.binarySchemaVersion))"],
                ["pending migrations", String(status.pendingMigrations.count)],
                ["users", count(status.counts?.users)],
                ["posts", count(status.counts?.posts)],
                ["likes", count(status.counts?.likes)],
                ["events", count(status.counts?.events)],
                ["last seq", status.counts.map { String($0.lastSeq) } ?? "-"],
            ]
            printLines(Array(table.lines().dropFirst()))
        }
        if let next = status.pendingMigrations.first {
            let count = status.pendingMigrations.count
            let what = count == 1 ? "migration \(next.version)" : "\(count) migrations, from \(next.version)"
            console.error(
                "The database needs \(what) (\(TextSanitizer.clean(next.name))): run 'feedsync init' to apply "
                    + (count == 1 ? "it" : "them") + "; commands that only read refuse the database until then.")
        }
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

/// What `status` reports, read in one snapshot of a database opened without migrating.
struct StatusReport: Sendable, Hashable {
    /// Row counts and the last seq.
    struct Counts: Sendable, Hashable {
        let users: Int, posts: Int, likes: Int, events: Int
        let lastSeq: Int64
    }

    /// The database file, as given.
    let path: String
    /// The database's schema version.
    let schemaVersion: Int
    /// The newest schema version this binary knows.
    let binarySchemaVersion: Int
    /// The migrations the database still needs, oldest first.
    let pendingMigrations: [Migration]
    /// The counts; `nil` when migrations are pending (the tables they read may not exist yet).
    let counts: Counts?

    /// Reads the report on `db`, inside one read transaction.
    init(_ db: Connection, migrator: Migrator, path: String) throws {
        self.path = path
        schemaVersion = try migrator.currentVersion(db)
        binarySchemaVersion = migrator.latestVersion
        pendingMigrations = try migrator.pendingMigrations(db)
        guard pendingMigrations.isEmpty else {
            counts = nil
            return
        }
        let log = EventLog(db)
        counts = Counts(
            users: try UserRepository(db).count(), posts: try PostRepository(db).count(), likes: try LikeRepository(db).count(),
            events: try log.count(), lastSeq: try log.lastSeq())
    }
}
